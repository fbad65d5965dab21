// Every point-to-point protocol of a run and its MPI tag on the world
// communicator, in one table so two protocols can never share a tag by accident.
// A host rank probes for several of them at once (the relay forwards shards and
// credits while the outfeed and loop summaries arrive), so they must be distinct.
#pragma once

namespace tpusim::cluster {

inline constexpr int kTagShard = 100;            // infeed: host -> core shard
inline constexpr int kTagCredit = 101;           // infeed: core -> host, a freed slot
inline constexpr int kTagShardPiece = 102;       // infeed: host -> core, a piece sent alone
inline constexpr int kTagBaseline = 200;         // report: plain-MPI baseline messages
inline constexpr int kTagCalibrationDone = 201;  // sim: the calibrating host -> every rank, done
inline constexpr int kTagOutfeed = 400;          // core -> host, one record per micro-step
inline constexpr int kTagLoopSummary = 401;      // host -> rank 0, one per loop
inline constexpr int kTagParams = 402;           // --params-out: replica 0 -> rank 0
inline constexpr int kTagPreconditioners = 403;  // Shampoo: owner host -> every core
inline constexpr int kTagLargeGather = 500;      // cluster: GatherBytes beyond one message
inline constexpr int kTagLargeAllToAll = 501;    // cluster: AllToAll beyond one message
inline constexpr int kTagProcessLink = 600;      // threads layout: every message between processes
                                                 // (on the link's own communicator)
inline constexpr int kTagForwardBase = 1000;     // single-host relay: + destination ordinal

}  // namespace tpusim::cluster
