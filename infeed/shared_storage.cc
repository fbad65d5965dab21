#include "infeed/shared_storage.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::infeed {

struct SharedStorage::Segment {
  static constexpr uint64_t kMagic = 0x7470757369'6d5353ull;  // "tpusimSS"
  uint64_t magic = kMagic;
  pthread_mutex_t mu;
  double us_per_byte = 0;    // 0: unlimited
  double burst_us = 0;       // one wave of requests, in microseconds of bandwidth
  double paid_until_us = 0;  // the theoretical arrival time: when every taker is paid for
  int writers = 0;
  int64_t writing_since_us = 0;  // when `writers` last became non-zero
  double writing_done_s = 0;     // writing seconds before that
  int64_t save_step = -1;
};

// The segment's mutex; a holder that died leaves it to the next taker, whose
// fields are still whole (each update is a few stores, finished or not begun).
class SharedStorage::Lock {
 public:
  explicit Lock(Segment& s) : mu_(s.mu) {
    if (pthread_mutex_lock(&mu_) == EOWNERDEAD) pthread_mutex_consistent(&mu_);
  }
  ~Lock() { pthread_mutex_unlock(&mu_); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  pthread_mutex_t& mu_;
};

namespace {

SharedStorage::Segment* Map(int fd, const std::string& name) {
  void* p = mmap(nullptr, sizeof(SharedStorage::Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) Fail("shared storage {}: mmap: {}", name, std::strerror(err));
  return static_cast<SharedStorage::Segment*>(p);
}

}  // namespace

std::string SharedStorage::Name(uint64_t run_token, int host) {
  return fmt::format("/tpusim-{:016x}-h{}", run_token, host);
}

SharedStorage SharedStorage::Create(const std::string& name, const StorageConfig& config, Clock& clock) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) Fail("shared storage {}: shm_open: {}", name, std::strerror(errno));
  if (ftruncate(fd, sizeof(Segment)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    Fail("shared storage {}: ftruncate: {}", name, std::strerror(err));
  }
  Segment* s = new (Map(fd, name)) Segment;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s->mu, &attr);
  pthread_mutexattr_destroy(&attr);
  if (config.bandwidth_mb_s > 0) {
    s->us_per_byte = 1.0 / config.bandwidth_mb_s;  // MB/s is bytes per microsecond
    s->burst_us = static_cast<double>(config.request_kib * 1024 * config.concurrency) * s->us_per_byte;
  }
  // Empty at the start, as TokenBucket is: the first read pays for itself.
  s->paid_until_us = static_cast<double>(clock.NowUs()) + s->burst_us;
  return SharedStorage(s, clock);
}

SharedStorage SharedStorage::Open(const std::string& name, Clock& clock) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0 && errno == ENOENT) return SharedStorage(nullptr, clock);
  if (fd < 0) Fail("shared storage {}: shm_open: {}", name, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Segment))) {
    close(fd);
    Fail("shared storage {}: the segment is not one tpusim made", name);
  }
  Segment* s = Map(fd, name);
  if (s->magic != Segment::kMagic) {
    munmap(s, sizeof(Segment));
    Fail("shared storage {}: the segment is not one tpusim made", name);
  }
  return SharedStorage(s, clock);
}

void SharedStorage::Unlink(const std::string& name) { shm_unlink(name.c_str()); }

SharedStorage::SharedStorage(SharedStorage&& other) noexcept
    : segment_(std::exchange(other.segment_, nullptr)), clock_(other.clock_) {}

SharedStorage& SharedStorage::operator=(SharedStorage&& other) noexcept {
  if (this != &other) {
    if (segment_) munmap(segment_, sizeof(Segment));
    segment_ = std::exchange(other.segment_, nullptr);
    clock_ = other.clock_;
  }
  return *this;
}

SharedStorage::~SharedStorage() {
  if (segment_) munmap(segment_, sizeof(Segment));
}

void SharedStorage::Acquire(int64_t bytes) {
  if (segment_->us_per_byte <= 0 || bytes <= 0) return;
  double start_us = 0;
  {
    Lock lock(*segment_);
    const double now = static_cast<double>(clock_->NowUs());
    segment_->paid_until_us =
        std::max(segment_->paid_until_us, now) + static_cast<double>(bytes) * segment_->us_per_byte;
    start_us = segment_->paid_until_us - segment_->burst_us;
  }
  clock_->SleepUntilUs(static_cast<int64_t>(std::ceil(start_us)));
}

void SharedStorage::BeginWrite(int64_t save_step) {
  Lock lock(*segment_);
  if (segment_->writers++ == 0) segment_->writing_since_us = clock_->NowUs();
  segment_->save_step = save_step;
}

void SharedStorage::EndWrite() {
  Lock lock(*segment_);
  if (segment_->writers == 0) return;
  if (--segment_->writers == 0) {
    segment_->writing_done_s += static_cast<double>(clock_->NowUs() - segment_->writing_since_us) * 1e-6;
  }
}

WriteActivity SharedStorage::Activity() const {
  Lock lock(*segment_);
  const double running =
      segment_->writers > 0 ? static_cast<double>(clock_->NowUs() - segment_->writing_since_us) * 1e-6 : 0.0;
  return {segment_->writing_done_s + running, segment_->save_step};
}

}  // namespace tpusim::infeed
