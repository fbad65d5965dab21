#include "sim/wire/params.h"

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/npy.h"
#include "cluster/large_messages.h"
#include "cluster/message_tags.h"

namespace tpusim::sim::wire {

using json = nlohmann::json;

// name -> (shape, offset) as a JSON index, then every array's values, for rank 0.
void SendParams(const cluster::Transport& world, int rank, const std::vector<NamedArray>& arrays) {
  json index = json::array();
  std::vector<float> values;
  for (const NamedArray& a : arrays) {
    index.push_back({{"name", a.name}, {"shape", a.shape}, {"offset", values.size()}});
    values.insert(values.end(), a.values.begin(), a.values.end());
  }
  std::string header = index.dump();
  std::vector<std::byte> message(8 + header.size() + values.size() * sizeof(float));
  uint64_t header_size = header.size();
  std::memcpy(message.data(), &header_size, 8);
  std::memcpy(message.data() + 8, header.data(), header.size());
  std::memcpy(message.data() + 8 + header.size(), values.data(), values.size() * sizeof(float));
  cluster::SendBytes(world, message, rank, cluster::kTagParams);
}

// Rank 0: writes each variable of replica 0 as DIR/NAME.npy (float32, C order).
void ReceiveParams(const cluster::Transport& world, int source, const std::string& dir) {
  std::vector<std::byte> message = cluster::ReceiveBytes(world, source, cluster::kTagParams);
  uint64_t header_size = 0;
  std::memcpy(&header_size, message.data(), 8);
  json index = json::parse(std::string(reinterpret_cast<const char*>(message.data()) + 8, header_size));
  const std::byte* values = message.data() + 8 + header_size;
  for (const json& v : index) {
    NpyArray array{"<f4", v["shape"].get<std::vector<int64_t>>(), {}};
    size_t bytes = static_cast<size_t>(array.num_elements()) * sizeof(float);
    const std::byte* begin = values + v["offset"].get<size_t>() * sizeof(float);
    array.data.assign(begin, begin + bytes);
    // A character device or FIFO (--params-out /dev/null) takes every array in place.
    const bool in_place = WritesInPlace(dir);
    std::filesystem::path path =
        in_place ? std::filesystem::path(dir) : std::filesystem::path(dir) / (v["name"].get<std::string>() + ".npy");
    std::error_code ec;
    if (!in_place) std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) Fail("--params-out {}: cannot create {}: {}", dir, path.parent_path().string(), ec.message());
    WriteNpy(path.string(), array, in_place ? "--params-out " + dir : "");  // atomically (base/npy.h)
  }
}

}  // namespace tpusim::sim::wire
