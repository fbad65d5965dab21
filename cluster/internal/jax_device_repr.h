// The text `print(jax.devices())` prints on a TPU pod, as a user pastes it:
//   [TpuDevice(id=0, process_index=0, coords=(0,0,0), core_on_chip=0), ...]
// (with `slice_index=N`, or on multislice jobs
//   MegaScalePjRtDevice(wrapped=TpuDevice(id=..., ...), slice_id=k)
// entries, read as the wrapped device with slice_index k), into the JSON device list that
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

// The printed list as a JSON array of device objects, a MegaScale wrapper
// replaced by its wrapped device with `slice_index` = its slice_id. Throws Error
// "<source>: ..." naming the character where the text stops being a device list.
nlohmann::json JaxReprAsJson(std::string_view text, const std::string& source);

}  // namespace tpusim::cluster::internal
