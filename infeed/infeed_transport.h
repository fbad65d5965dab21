// Moving shards from host ranks into bounded per-core infeed queues over a
// cluster::Transport (MPI between ranks, or in-process endpoints in unit tests).
//
// Flow control is credit based: a host starts with `queue_depth` credits per core it
// feeds and spends one per shard; a core returns a credit after it has dequeued and
// consumed a shard. So a host never has more than queue_depth unconsumed shards in
// flight per core and memory stays bounded however long the run. A core has
// queue_depth slots, pre-posts their first messages and blocks only when the next
// step's have not arrived.
// In single-host mode a shard for a core on another host travels through that host's
// rank (a network hop, then the host-to-core hop), and credits travel back the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/huge_page_allocator.h"
#include "base/watchdog.h"
#include "cluster/message_tags.h"
#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "infeed/infeed_plan.h"
#include "infeed/shard_message.h"
#include "infeed/stage_times.h"

namespace tpusim::infeed {

// One step of a host's infeed, as the sender saw it leave.
struct SentStep {
  int64_t step = 0;
  double build_s = 0;        // a worker's wall time filling and encoding it
  double enqueue_s = 0;      // the sender's time on it, credit waits included
  double sent_s = 0;         // when its last shard left, seconds since TransportOptions::origin_s
  double build_cpu_s = 0;    // the worker's thread CPU over the same time as build_s
  double enqueue_cpu_s = 0;  // the sender's thread CPU over the same time as enqueue_s
};

// What the host side of the infeed tells, and asks of, the code around it — one
// narrow observer instead of a callback per event. Every method has a default
// that does nothing, so a host implements only what it uses.
class HostObserver {
 public:
  virtual ~HostObserver() = default;
  // On the thread that built `step` (a worker, or in the ranks layout the sender
  // when its workers sleep and steps are cheap to build) after `build_s` seconds
  // of building, `build_cpu_s` of them on a CPU (a slow host's extra work plugs
  // in here); must be thread-safe.
  virtual void StepBuilt(int64_t /*step*/, double /*build_s*/, double /*build_cpu_s*/) {}
  // On the sending thread, after each step's shards are on their way.
  virtual void StepSent(const SentStep& /*step*/) {}
  // Host ranks also serve other protocols (the outfeed and the post-loop work)
  // while the infeed runs, and must never block them: the host calls Poll after
  // every step and whenever it would otherwise wait (for a credit, a worker or a
  // relayed shard).
  virtual void Poll() {}
  // A relay host hands every probed message that is not the infeed's here, which
  // must receive it; false (the default) = nobody expects any, and the relay
  // fails naming it.
  virtual bool ForeignMessage(const cluster::Pending& /*message*/) { return false; }
};

// Variable-size bytes sent after a shard's tensors in the same message (tpusim
// puts the embedding ids of the shard's rows there as COO), so they share the
// shard's credit, slot and ordering and cannot overtake or deadlock it.
// Capacity(route) bounds them, keeping a core's slots fixed-size; both hosts and
// cores call it. Encode runs on an enqueue worker after the batch is filled (so
// it must be thread-safe) and overwrites `out`.
class ShardTrailer {
 public:
  virtual ~ShardTrailer() = default;
  virtual size_t Capacity(const ShardRoute& route) const = 0;
  virtual void Encode(int64_t step, std::span<const int64_t> host_ids, const ShardRoute& route,
                      std::vector<std::byte>& out) const = 0;
};

struct TransportOptions {
  int parallelism = 1;    // enqueue workers building shards (tpu_infeed_parallelism)
  int queue_depth = 4;    // slots per core
  int64_t num_steps = 0;  // infeed steps in the run
  // MonotonicSeconds() at the run's start: SentStep::sent_s counts from here.
  double origin_s = 0;
  // The host's observer (null: none); borrowed.
  HostObserver* observer = nullptr;
  // Deadline on the host's and core's waits (null: none); borrowed.
  Watchdog* watchdog = nullptr;
  // How a host waits when there is nothing to do (base/backoff.h). false (the ranks
  // layout): it yields and polls again, staying in MPI, whose large sends move only
  // while their sender calls it. true (threads, packed): after a short spin it
  // sleeps, so hundreds of waiting rank threads leave the CPU to those working.
  bool sleep_when_idle = false;
  // How a core waits for its next shard in the ranks layout. false: in MPI_Wait,
  // which spins (yielding). true, for more ranks on the machine than CPUs: it tests
  // its slot and sleeps between tests (20 us of yields, then sleeps doubling to
  // 100 us), so idle cores leave the CPUs to the host pipeline they wait for. On
  // 2 CPUs (v4-8, zlib shards, 2 workers) spinning cores took a fair share of both
  // and the host built 50,842-53,979 examples/s of a 61,617-65,024 capacity; with
  // sleeps 46,036-54,601 of 49,705-58,819 (7.7-8.0 % short), and a transfer-bound
  // run (v3-8, cached uint8 [224, 224, 3]) moved as much or more (40,868-44,986
  // examples/s against 34,391-39,017).
  bool core_sleeps_when_idle = false;
  // Bytes after each shard's tensors (null: none); borrowed. Hosts encode them,
  // cores size their slots by its Capacity.
  const ShardTrailer* trailer = nullptr;
  // Optional, used instead of the BatchFiller: returns the host batch of `step` from
  // storage the caller keeps unchanged until RunHostInfeed returns (a cached pool)
  // and writes each row's example id to `ids`; shards are sent straight from it, so
  // no package batch is allocated or filled. Called on enqueue workers (or the
  // sender, for a cheap step while they sleep).
  std::function<const Batch&(int64_t step, std::span<int64_t> ids)> borrow_batch;
  // The first step of the report's window, whose rate leaves the first loop out
  // as a warm-up: HostFeedStats::warmup_costs holds the costs of the steps before
  // it, so per-example costs can be taken over the rate's own steps (in
  // configs/runs/v4-8-real-work.yaml the first step fills the shuffle buffer and
  // the first loop runs on cold caches: 0.37 of a 600-step run's 0.75 build CPU
  // seconds). 0 = no warm-up.
  int64_t window_first_step = 0;
  // Steps built ahead of the sender (the prefetch depth); 0 = 2 * parallelism +
  // queue_depth, enough that a worker never has to wake up for the next step.
  int prefetch = 0;
};

// Fills the host batch ([rows_per_step, ...] per feature) for `step` and the global
// example id of each row; must be thread-safe (enqueue workers, and the sender for
// a cheap step while they sleep, call it concurrently for different steps).
using BatchFiller = std::function<void(int64_t step, Batch& host_batch, std::span<int64_t> ids)>;

struct HostFeedStats {
  int64_t shards_sent = 0;
  int64_t bytes_sent = 0;          // payload + headers put on the wire by this host
  int64_t shards_forwarded = 0;    // single-host mode: relayed for another host
  int64_t shards_handed_over = 0;  // of shards_sent: handed over in this process, not copied
  double credit_wait_s = 0;        // time blocked waiting for a core to free a slot
  double build_wait_s = 0;         // time the sender waited for workers to build a step
  double send_s = 0;               // time in the enqueue itself, credit waits included
  double build_s = 0;              // workers' time building steps (fill, encode), summed
  // Step packages (host batch, packed pieces, meta blocks) allocated and first touched:
  // the pool built before the first step, sized by prefetch and queue depth, plus
  // any a step had to allocate because none was free (none in a steady run).
  int64_t packages_allocated = 0;
  // The transport's part of the host's StageCosts: enqueue_cpu_s (the workers'
  // thread CPU building packages — allocating, encoding, packing pieces, trailers
  // — and the sender's sending shards, credit waits left out), package_cpu_s (the
  // packing alone), build_cpu_s (the workers' whole thread CPU building steps, the
  // fill included), examples (rows sent) and device_bytes (tensor pieces and
  // trailers sent); the rest is 0.
  StageCosts costs;
  // Of costs, the steps before TransportOptions::window_first_step.
  StageCosts warmup_costs;
};

// Runs this host rank's part of the infeed for the whole run: the enqueue loop of an
// infeed host, the relay loop of a host that only forwards, or nothing. `world`
// addresses ranks by RankLayout. Throws Error when a peer sends something
// unexpected; transport failures come back as Error too.
HostFeedStats RunHostInfeed(const InfeedPlan& plan, const cluster::RankLayout& layout, const cluster::Transport& world,
                            int host, const TransportOptions& options, const BatchFiller& fill);

// A piece of at least this many bytes travels as a message of its own, contiguous
// on both sides: Open MPI moves a large contiguous message with one copy (vader's
// single-copy mechanism, CMA) but copies a derived datatype through shared-memory
// fragments. The meta block, smaller pieces and the trailer share the shard's
// first message; smaller pieces gain nothing from a single copy and would pay a
// message each (scripts/bench, BM_InfeedTransfer).
inline constexpr size_t kAloneBytes = size_t{64} << 10;

// A core receives a step's pieces that travel alone one step ahead while they total
// less than this, and when it dequeues the step from here on (CoreInfeedQueue::
// PostPieces): two steps' pieces of 2 MiB and more no longer stay in the caches.
inline constexpr size_t kPiecesAheadBelow = size_t{2} << 20;

// A core's infeed queue: queue_depth receive slots. The first message of each step
// is pre-posted; the pieces that travel alone are received when the step is
// dequeued (or one step ahead while small), into the slot released last (see
// PostPieces).
class CoreInfeedQueue {
 public:
  CoreInfeedQueue(const InfeedPlan& plan, const ShardRoute& route, const cluster::Transport& world, int host_rank,
                  const TransportOptions& options);
  ~CoreInfeedQueue();
  CoreInfeedQueue(const CoreInfeedQueue&) = delete;
  CoreInfeedQueue& operator=(const CoreInfeedQueue&) = delete;

  // Blocks until the shard of `step` (steps are dequeued in order) has arrived and
  // returns a view of it, valid until Release(step). `wait_s` receives the time spent blocked and `occupancy` the
  // number of slots already full when the dequeue started.
  ShardCodec::View Dequeue(int64_t step, double* wait_s, int* occupancy);
  // Frees the slot of `step` (re-posting it for step + queue_depth) and returns a
  // credit to the host.
  void Release(int64_t step);

 private:
  void LayOutWireSlots();
  void LayOutHandOverSlots(size_t num_features);
  void Post(int64_t step);
  void PostPieces(int64_t step);
  std::span<cluster::Request> SlotRequests(size_t slot);
  bool Arrived(size_t slot);
  size_t TrailerBytes(size_t received) const;
  ShardCodec::View DecodeSlot(size_t slot);
  ShardCodec::View DecodeHandOver(size_t slot);

  ShardCodec codec_;
  size_t trailer_capacity_ = 0;
  const cluster::Transport& world_;
  int host_rank_;
  int depth_;
  int64_t num_steps_;
  Watchdog* watchdog_;
  bool core_sleeps_;
  bool hand_over_;  // the host hands its packages over in this process (no copy)
  int32_t credit_[2];
  std::vector<HugePageVector<std::byte>> slots_;
  // Where a feature's piece lies in a slot (LayOutWireSlots): in the first message,
  // or alone at a page boundary after it.
  struct PiecePlace {
    bool alone = false;
    size_t offset = 0;
    size_t bytes = 0;
  };
  std::vector<PiecePlace> places_;          // per feature (wire slots)
  std::vector<PiecePlace> alone_;           // the pieces that travel alone, in order
  size_t first_wire_bytes_ = 0;             // fixed bytes of a shard's first message
  size_t first_capacity_ = 0;               // and with the largest trailer
  std::vector<cluster::Request> requests_;  // per slot: the first message, then alone_
  static constexpr size_t kNoSlot = ~size_t{0};
  // Per slot (step % depth): the slot whose piece blocks hold its step's pieces
  // that travel alone, kNoSlot before its dequeue.
  std::vector<size_t> pieces_in_;
  std::vector<size_t> free_piece_slots_;  // the last released on top
  bool pieces_ahead_ = false;             // a step's pieces are received one step ahead (PostPieces)
};

}  // namespace tpusim::infeed
