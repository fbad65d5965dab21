// `tpusim launch` runs mpirun as a child and watches how the job ends. mpirun's
// standard error passes through this process line by line, which lets launch
// (1) say in one tpusim line what Open MPI says in a banner when it loses a node
// — "ORTE has lost communication with a remote daemon ... on node tpusim2" becomes
// "lost TPU host 2 (ranks 10-14) on node tpusim2: ..." — or a rank dies of a
// signal, (2) hold Open MPI's own banners back until the job ends and drop them
// once its first error has been told (what `mpirun --quiet` did, which also hid the
// lost node), and (3) end an mpirun
// that does not end by itself: after a rank's error line (or a lost node) mpirun
// normally stops the job within a second, but when a link is down it waits for
// the daemon it cannot reach. After `grace_s` without an exit the supervisor says
// so in one line and stops mpirun (SIGTERM, then SIGKILL). Signals sent to launch
// (a terminal's ^C, `timeout`) are passed on to mpirun, which is killed with
// every rank when it has not ended 4 s (or `grace_s`, if shorter) after one. The
// supervisor adopts the job's orphans (base/descendants.h), and when mpirun has
// ended, any rank still running is killed: nothing of the job outlives launch.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"

namespace tpusim::app {

class MpirunSupervisor {
 public:
  struct Options {
    // How long mpirun may take to end after the first error; > 0.
    double grace_s = 10;
    // What runs on a node of the hostfile ("TPU host 2 (ranks 10-14)"), or "" when
    // the node is not known (no hostfile).
    std::function<std::string(const std::string& node)> describe_node;
  };

  explicit MpirunSupervisor(Options options) : options_(std::move(options)) {}
  MpirunSupervisor(const MpirunSupervisor&) = delete;
  MpirunSupervisor& operator=(const MpirunSupervisor&) = delete;

  // Runs `argv` (argv[0] is looked up on PATH) until it ends and returns its
  // waitpid status. Throws Error when it cannot be started.
  int Run(std::vector<std::string>& argv);
  // Whether the supervisor stopped a stuck mpirun (and said so in its line).
  bool stopped() const { return terminated_.has_value(); }
  // Whether an error has been told: a rank's line or one of the supervisor's.
  bool told_error() const { return first_error_.has_value(); }
  // The signal passed on to mpirun after which the supervisor had to kill it (and
  // said so in its line), or 0.
  int killed_after_signal() const { return killed_ ? killed_signal_ : 0; }
  // The last signal passed on to mpirun (SIGINT, SIGTERM or SIGHUP), or 0; known
  // once Run has returned.
  int passed_on_signal() const { return passed_on_signal_; }

  // The tpusim line for one Open MPI banner (the lines between two rules), or
  // nullopt when the banner is not one the supervisor translates (exposed for tests).
  std::optional<std::string> Translate(const std::vector<std::string>& banner) const;

  // Whether one line of mpirun's standard error is an error a rank or mpirun
  // reported, after which the job must end (exposed for tests).
  static bool IsErrorLine(std::string_view line);
  // Whether a line is one of Open MPI's own ("[vm:12153] 1 more process has sent
  // help message ..."), held back with its banners (exposed for tests).
  static bool IsOpenMpiLine(std::string_view line);

 private:
  void Start(std::vector<std::string>& argv);
  // Reads what mpirun wrote, up to `timeout_ms`; false at end of file.
  bool Pump(int timeout_ms);
  void HandleLine(std::string line);
  void EndBanner();
  // Open MPI's messages wait until the job ends: shown then if nobody told an
  // error, dropped once somebody does (they lead up to it or repeat it).
  void Hold(std::string line);
  void ReleaseHeld();
  void Emit(const std::string& line);
  void NoteError();
  // Stops mpirun when it outlives the grace period (once: SIGTERM, later SIGKILL).
  void StopIfStuck();
  // Kills mpirun when it outlives the grace period after a signal passed on to it.
  void KillIfDeaf();
  int Wait();

  Options options_;
  int child_ = -1;
  int stderr_fd_ = -1;
  std::string partial_;                             // a line not yet ended
  std::optional<std::vector<std::string>> banner_;  // lines of an open banner
  std::vector<std::string> held_;                   // Open MPI's, not yet shown
  std::optional<MonotonicTime> first_error_;
  bool told_stop_ = false;  // the supervisor's own line said the job is stopping
  std::optional<MonotonicTime> terminated_;
  std::optional<MonotonicTime> signalled_;  // when Wait first saw a signal passed on
  bool killed_ = false;                     // KillIfDeaf sent SIGKILL
  int killed_signal_ = 0;                   // the signal passed on before it
  int passed_on_signal_ = 0;                // g_forwarded_signal when mpirun ended
};

}  // namespace tpusim::app
