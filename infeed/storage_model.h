// The storage a host's file reads are charged against (input.storage): a per-request
// latency and a bandwidth cap, applied on the injected clock (base/clock.h) on top
// of the real reads of the dataset's files, so a fast local disk can stand for
// remote or slow storage and the tests need no real waiting.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "infeed/token_bucket.h"

namespace tpusim::infeed {

class SharedStorage;  // infeed/shared_storage.h

struct StorageConfig {
  double bandwidth_mb_s = 0;   // MB (1e6 bytes) per second per host; 0 = unlimited
  double latency_us = 0;       // per request
  int64_t request_kib = 1024;  // a read is split into requests of this many KiB
  int concurrency = 1;         // requests in flight at once
  bool direct_io = false;      // read with O_DIRECT (no page cache); see ReadOnlyFile
};

// What one read costs: requests = ceil(bytes / request size), paid in waves of
// `concurrency` requests, each wave one latency; then the bytes go through a token
// bucket at the bandwidth (burst: one wave of requests). The bucket keeps earning
// while a read waits out its latency, so latency and transfer overlap as in a
// pipelined store: a stream of reads takes about the larger of its latency waves
// and its bytes / bandwidth. Thread-safe. With a SharedStorage, the bytes are
// taken from its bandwidth instead, which other ranks of the host take from too
// (a checkpoint's writes beside the input's reads).
class StorageModel {
 public:
  // Borrows `clock` and `shared` (may be null), which must outlive this. Values
  // are validated by the config.
  StorageModel(const StorageConfig& config, Clock& clock, SharedStorage* shared = nullptr);

  // Sleeps on the clock for the modeled cost of reading `bytes` (> 0) as one read.
  void Pay(int64_t bytes);
  // Requests a read of `bytes` is split into.
  int64_t Requests(int64_t bytes) const;

 private:
  StorageConfig config_;
  Clock& clock_;
  TokenBucket bandwidth_;
  SharedStorage* shared_;
};

}  // namespace tpusim::infeed
