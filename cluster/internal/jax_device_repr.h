// The text `print(jax.devices())` prints on a TPU pod, as a user pastes it:
//   [TpuDevice(id=0, process_index=0, coords=(0,0,0), core_on_chip=0), ...]
// (with `slice_index=N` on multislice jobs), read into the JSON device list that
// ImportJaxDevices reads (cluster/topology_import.h). Keys pass through as they
// are (the importer names any it does not know); a tuple becomes an array and a
// quoted string a string. Written by hand: a bounded recursive-descent reader of
// exactly this shape, never reading past the text.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tpusim::cluster::internal {

// Whether a device list is in the printed form: after its '[' comes a name
// (TpuDevice), not a JSON object.
bool LooksLikeJaxRepr(std::string_view text);

// The printed list as a JSON array of device objects. `slice_index` is dropped
// when every device has the same one; devices of several slices fail with one
// line (multislice is not supported yet). Throws Error "<source>: ..." naming the
// character where the text stops being a device list.
nlohmann::json JaxReprAsJson(std::string_view text, const std::string& source);

}  // namespace tpusim::cluster::internal
