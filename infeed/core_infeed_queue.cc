// CoreInfeedQueue (infeed_transport.h): a core's slots, the receives it posts
// ahead and on demand, and the credits it returns.
#include "infeed/infeed_transport.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "base/adaptive_mutex.h"
#include "base/backoff.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/huge_page_allocator.h"
#include "infeed/cpu_timer.h"
#include "infeed/internal/transport_wire.h"

namespace tpusim::infeed {

using cluster::kTagCredit;
using cluster::kTagShard;
using cluster::kTagShardPiece;
using internal::CreditBytes;
using internal::HandOverBytes;
using internal::TravelsAlone;

CoreInfeedQueue::CoreInfeedQueue(const InfeedPlan& plan, const ShardRoute& route, const cluster::Transport& world,
                                 int host_rank, const TransportOptions& options)
    : codec_(plan.features(), route),
      trailer_capacity_(options.trailer ? options.trailer->Capacity(route) : 0),
      world_(world),
      host_rank_(host_rank),
      depth_(options.queue_depth),
      num_steps_(options.num_steps),
      watchdog_(options.watchdog),
      core_sleeps_(options.core_sleeps_when_idle),
      hand_over_(plan.source_host(route.dst_host, route.dst_ordinal) == route.dst_host &&
                 world.SharesMemoryWith(host_rank)),
      credit_{route.dst_host, route.dst_ordinal} {
  if (hand_over_) {
    LayOutHandOverSlots(plan.features().size());
  } else {
    LayOutWireSlots();
  }
  requests_.resize(static_cast<size_t>(depth_) * (1 + alone_.size()));
  pieces_in_.assign(static_cast<size_t>(depth_), kNoSlot);
  for (int slot = depth_ - 1; slot >= 0; --slot) free_piece_slots_.push_back(static_cast<size_t>(slot));
  size_t piece_bytes = 0;
  for (const PiecePlace& p : alone_) piece_bytes += p.bytes;
  pieces_ahead_ = piece_bytes < kPiecesAheadBelow;
  for (int64_t s = 0; s < std::min<int64_t>(depth_, num_steps_); ++s) Post(s);
}

// A slot holds a shard's first message as it comes (HostSender::SendShard: the
// meta block, the pieces that do not travel alone and the trailer, so a shorter
// trailer simply fills less of it), then each piece that travels alone, a
// message of its own, at a page boundary (of the slot, which starts a page when
// it is on huge pages, from 2 MiB): a copy between buffers that differ in
// their offset within a page ran 3-7 % slower at 1-4 MiB here and 15-27 % at
// 16 MiB (Open MPI's `cma`, 5 Dec 2026; the host's pieces mostly start a page).
void CoreInfeedQueue::LayOutWireSlots() {
  constexpr size_t kPieceAlign = 4096;
  size_t first = codec_.meta_bytes();
  for (size_t f = 0; f < codec_.piece_count(); ++f) {
    const size_t bytes = codec_.piece_bytes(f);
    places_.push_back({TravelsAlone(bytes), first, bytes});
    if (!places_.back().alone) first += bytes;
  }
  first_wire_bytes_ = first;
  first_capacity_ = first + trailer_capacity_;
  size_t end = first_capacity_;
  for (PiecePlace& p : places_) {
    if (!p.alone) continue;
    p.offset = (end + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
    end = p.offset + p.bytes;
    alone_.push_back(p);
  }
  slots_.assign(static_cast<size_t>(depth_), HugePageVector<std::byte>(end));
}

// A handed-over shard's slot holds the host's (address, bytes) pairs: one message.
void CoreInfeedQueue::LayOutHandOverSlots(size_t num_features) {
  const size_t bytes = HandOverBytes(num_features);
  slots_.assign(static_cast<size_t>(depth_), HugePageVector<std::byte>(bytes));
  first_capacity_ = first_wire_bytes_ = bytes;
}

CoreInfeedQueue::~CoreInfeedQueue() = default;

// The requests of a slot: its first message's, then one per piece that travels alone.
std::span<cluster::Request> CoreInfeedQueue::SlotRequests(size_t slot) {
  return std::span<cluster::Request>(requests_).subspan(slot * (1 + alone_.size()), 1 + alone_.size());
}

// The first message of a step is received into its slot (step % depth), posted
// queue_depth steps ahead.
void CoreInfeedQueue::Post(int64_t step) {
  size_t slot = static_cast<size_t>(step % depth_);
  SlotRequests(slot)[0] = world_.Irecv(std::span<std::byte>(slots_[slot]).first(first_capacity_), host_rank_, kTagShard,
                                       "MPI_Irecv (infeed slot)");
}

// The pieces that travel alone are received when their step is dequeued, into the
// piece blocks of the slot released last. Posted ahead, every slot's pieces would
// be written in turn and the queue's large buffers would be queue_depth times
// a shard; received on demand into the slot the last step used, they are one
// shard that stays in the caches. A large message moves only while its receiver
// is in MPI anyway (single copy, or the in-process transport's rendezvous), so
// nothing arrives later for it. Smaller pieces (kPiecesAheadBelow) are received
// one step ahead, into a second slot: under Open MPI's `none` both ranks copy,
// the host into shared-memory fragments and the core out of them, and only a
// receive that is posted lets the host start on the next step while the core
// takes this one. BM_InfeedTransfer, 5 Dec 2026 (medians of 5, GB/s against the
// baseline's): on demand, `none` 9.6 / 12.1 at 256 KiB / 1 MiB (11.8 / 14.1) and
// `cma` 33.1 / 17.6 at 4 / 16 MiB (38.4 / 17.9); one step ahead, `none` 13.2 /
// 16.1 (13.0 / 16.4) but `cma` 26.5 / 11.0 (34.3 / 16.3).
void CoreInfeedQueue::PostPieces(int64_t step) {
  const size_t slot = static_cast<size_t>(step % depth_);
  if (alone_.empty() || pieces_in_[slot] != kNoSlot || free_piece_slots_.empty()) return;
  pieces_in_[slot] = free_piece_slots_.back();
  free_piece_slots_.pop_back();
  std::span<cluster::Request> requests = SlotRequests(slot);
  std::byte* base = slots_[pieces_in_[slot]].data();
  for (size_t k = 0; k < alone_.size(); ++k) {
    requests[1 + k] = world_.Irecv(std::span<std::byte>(base + alone_[k].offset, alone_[k].bytes), host_rank_,
                                   kTagShardPiece, "MPI_Irecv (infeed piece)");
  }
}

// How a core waits for its shard when it sleeps (TransportOptions::
// core_sleeps_when_idle): short, so a transfer that needs the receiver's MPI
// progress stalls for at most a tenth of a millisecond.
constexpr std::chrono::microseconds kCoreSpin{20};
constexpr std::chrono::microseconds kCoreSleepCap{100};

ShardCodec::View CoreInfeedQueue::Dequeue(int64_t step, double* wait_s, int* occupancy) {
  size_t slot = static_cast<size_t>(step % depth_);
  int full = 0;  // steps whose first message is in: the host sent them
  for (int64_t s = step; s < std::min<int64_t>(step + depth_, num_steps_); ++s) {
    if (!SlotRequests(static_cast<size_t>(s % depth_))[0].Test()) break;
    ++full;
  }
  if (occupancy) *occupancy = full;
  PostPieces(step);  // a free slot is left: at most queue_depth steps are held
  if (pieces_ahead_ && step + 1 < num_steps_) PostPieces(step + 1);
  MonotonicTime before = MonotonicNow();
  std::span<cluster::Request> requests = SlotRequests(slot);
  if (!std::all_of(requests.begin(), requests.end(), [](const cluster::Request& r) { return r.done(); })) {
    Watchdog::Scope wait(watchdog_, "the infeed shard of step", step, host_rank_);
    if (core_sleeps_) {
      Backoff backoff(true, kCoreSpin, kCoreSleepCap);
      while (!Arrived(slot)) backoff.Pause();
    } else {
      // A shard due within kCoreSpin is taken by yielding: a blocking wait's sleep
      // and wake-up cost ~9 us each on this machine (a 20 us spin cut a thread
      // ping-pong's round trip from 17.7 to 1.4 us).
      Backoff spin(true, kCoreSpin, kCoreSleepCap);
      while (!Arrived(slot) && spin.Next(true).count() == 0) std::this_thread::yield();
    }
    // The messages of a shard complete in order: waiting on the last first wakes
    // the core once per shard, after which the others are done.
    for (auto r = requests.rbegin(); r != requests.rend(); ++r) r->Wait();
  }
  if (wait_s) *wait_s = SecondsSince(before);
  ShardCodec::View decoded = hand_over_ ? DecodeHandOver(slot) : DecodeSlot(slot);
  if (decoded.header.step != step) {
    Fail("infeed: core {}/{} expected step {} but the shard says step {}", credit_[0], credit_[1], step,
         decoded.header.step);
  }
  return decoded;
}

// The shard in a slot's bytes: the first message's meta block and pieces, the
// pieces that travel alone in the slot they were received into (PostPieces), then
// the trailer the first message brought beyond its fixed bytes.
ShardCodec::View CoreInfeedQueue::DecodeSlot(size_t slot) {
  std::span<const std::byte> first(slots_[slot]);
  std::span<const std::byte> alone(slots_[alone_.empty() ? slot : pieces_in_[slot]]);
  std::vector<std::span<const std::byte>> pieces;
  for (const PiecePlace& p : places_) pieces.push_back((p.alone ? alone : first).subspan(p.offset, p.bytes));
  ShardCodec::View decoded = codec_.DecodeParts(first.first(codec_.meta_bytes()), pieces);
  decoded.trailer = first.subspan(first_wire_bytes_, TrailerBytes(SlotRequests(slot)[0].received_bytes()));
  return decoded;
}

// The shard a slot's hand-over points to, read in the host's package in place.
ShardCodec::View CoreInfeedQueue::DecodeHandOver(size_t slot) {
  const size_t received = SlotRequests(slot)[0].received_bytes();
  const size_t num_features = codec_.piece_count();
  if (received != HandOverBytes(num_features)) {
    Fail("infeed: core {}/{} received a hand-over of {} bytes, expected {}", credit_[0], credit_[1], received,
         HandOverBytes(num_features));
  }
  std::vector<uint64_t> words(2 * (2 + num_features));
  std::memcpy(words.data(), slots_[slot].data(), received);
  auto at = [&](size_t k) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(words[2 * k])),
                                      static_cast<size_t>(words[2 * k + 1]));
  };
  std::vector<std::span<const std::byte>> pieces;
  for (size_t f = 0; f < num_features; ++f) pieces.push_back(at(2 + f));
  ShardCodec::View decoded = codec_.DecodeParts(at(0), pieces);
  decoded.trailer = at(1);
  if (decoded.trailer.size() > trailer_capacity_) {
    Fail("infeed: core {}/{} was handed a trailer of {} bytes, capacity {}", credit_[0], credit_[1],
         decoded.trailer.size(), trailer_capacity_);
  }
  return decoded;
}

// Whether slot's receives have completed. A completed request keeps its status,
// so the first message's size (which says how many trailer bytes arrived) stays
// readable until the slot is posted again.
bool CoreInfeedQueue::Arrived(size_t slot) {
  std::span<cluster::Request> requests = SlotRequests(slot);
  return std::all_of(requests.begin(), requests.end(), [](cluster::Request& r) { return r.Test(); });
}

// What the first message brought beyond its fixed bytes is the trailer.
size_t CoreInfeedQueue::TrailerBytes(size_t received) const {
  if (received < first_wire_bytes_ || received > first_wire_bytes_ + trailer_capacity_) {
    Fail("infeed: core {}/{} received {} bytes, expected {} plus a trailer of at most {}", credit_[0], credit_[1],
         received, first_wire_bytes_, trailer_capacity_);
  }
  return received - first_wire_bytes_;
}

void CoreInfeedQueue::Release(int64_t step) {
  const size_t slot = static_cast<size_t>(step % depth_);
  if (pieces_in_[slot] != kNoSlot) free_piece_slots_.push_back(std::exchange(pieces_in_[slot], kNoSlot));
  if (step + depth_ < num_steps_) Post(step + depth_);
  world_.Send(CreditBytes(credit_), host_rank_, kTagCredit);
}

}  // namespace tpusim::infeed
