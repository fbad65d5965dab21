// The processes a tpusim command started, and everything they started in turn,
// so that a signal to `launch`, `sweep` or `capacity` ends the whole job. mpirun
// puts each rank in a process group of its own, so a signal to one group does not
// reach them all; and a rank whose mpirun was killed is orphaned. A process that
// adopts orphans (AdoptOrphans) has them reparented to it, so walking /proc from
// it still finds every process of its job. Linux only (/proc, prctl).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

namespace tpusim {

// Makes this process the subreaper of its descendants (PR_SET_CHILD_SUBREAPER):
// a process orphaned by a killed parent becomes its child rather than init's.
// Returns false when the kernel refuses (the walk then misses orphans).
bool AdoptOrphans();

// The live (not zombie) processes descended from this one, read from /proc;
// parents before their children. Processes of other users are not readable and
// are left out. Thread-compatible.
std::vector<pid_t> Descendants();

// SIGKILLs every descendant of this process until none is left or `timeout` has
// passed, and reaps those that are its children — all but `keep` (a child whose
// exit status the caller still waits for; 0: none). Returns whether none is left.
bool KillDescendants(std::chrono::milliseconds timeout, pid_t keep = 0);

}  // namespace tpusim
