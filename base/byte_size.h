// A size in the unit that shows it: PiB and TiB from 1 of each (sizes no machine
// has), GiB from 0.1 GiB, MiB from 0.1 MiB, KiB from 1 KiB, else bytes ("96.0 TiB",
// "2.39 GiB", "12.5 MiB", "300 KiB", "512 B").
#pragma once

#include <string>

#include <fmt/format.h>

namespace tpusim {

inline std::string ByteSize(double bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024, kPiB = kTiB * 1024;
  if (bytes >= kPiB) return fmt::format("{:.1f} PiB", bytes / kPiB);
  if (bytes >= kTiB) return fmt::format("{:.1f} TiB", bytes / kTiB);
  if (bytes >= 0.1 * kGiB) return fmt::format("{:.2f} GiB", bytes / kGiB);
  if (bytes >= 0.1 * kMiB) return fmt::format("{:.1f} MiB", bytes / kMiB);
  if (bytes >= kKiB) return fmt::format("{:.0f} KiB", bytes / kKiB);
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace tpusim
