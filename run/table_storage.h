// Where the embedding tables live: allocated on this machine, or modeled (only the
// rows a run touches held, docs/design-notes.md "Real-size tables"), and whether
// they would fit the target pod's HBM.
#pragma once

#include <string>
#include <vector>

#include "cluster/topology.h"
#include "embedding/config.h"
#include "run/run_config.h"

namespace tpusim::run {

// Bytes the tables take when allocated, every core's shard with its optimizer
// slots and gradient copy (what this machine holds when it plays every core).
double AllocatedTableBytes(const embedding::EmbeddingConfig& config);

// The first modeled table's name, "" when every table is allocated.
std::string FirstModeledTable(const embedding::EmbeddingConfig& config);

// Makes every `storage: auto` table allocated, or modeled when the allocated
// tables would take more than half of `machine_bytes` (the rest is the run's).
// Returns the line that says a table was modeled automatically, "" otherwise.
std::string ChooseTableStorage(embedding::EmbeddingConfig& config, double machine_bytes);

// The tables on the target's cores: the largest shard of each table with its
// optimizer slots, summed, against `hbm_gib_per_core`.
struct TablesOnCores {
  double bytes_per_core = 0;
  double hbm_bytes_per_core = 0;  // 0: the topology gives no HBM figure
  bool fit = true;
  std::string line;  // "embedding: the tables need ... : they fit" (empty: no tables)
};
TablesOnCores TablesOnTheCores(const embedding::EmbeddingConfig& config, int num_cores, double hbm_gib_per_core,
                               const std::string& topology);

// What a run with embedding tables says of them before it starts: the storage
// note (if tables were modeled) and the tables on `topology`'s cores.
std::vector<std::string> TableLines(const EmbeddingSection& embedding, const cluster::Topology& topology);

// Rows a modeled table of `config.tables[table]` holds after `examples` trained
// examples: the expected distinct ids its features draw (uniform or Zipf).
double ExpectedRowsHeld(const embedding::EmbeddingConfig& config, size_t table, double examples);

}  // namespace tpusim::run
