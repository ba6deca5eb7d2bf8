// A simulated run's slices for whole-run analyses (the fleet diagnosis reads
// a pod of thousands of chips three times): made from its schedule program
// run by program run and chip by chip, as SimTimelineReader::ForEachSlice
// gives them, but handed over a chip's run at a time (no call per slice),
// for the steps wanted only and, where asked, the top-level slices only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "profiler/trace/sim_program.h"
#include "store/reader.h"

namespace shardscope::store {

// names.name by name_id (by index: the ids are handed out from 0).
class SimNames {
 public:
  explicit SimNames(std::map<int32_t, std::string> names);
  const std::string* Of(int32_t id) const {  // "" for an id not in names
    if (id >= 0 && static_cast<size_t>(id) < by_id_.size()) return by_id_[static_cast<size_t>(id)];
    auto it = names_.find(id);
    return it == names_.end() ? &kUnnamed : &it->second;
  }

 private:
  static const std::string kUnnamed;
  std::map<int32_t, std::string> names_;
  std::vector<const std::string*> by_id_;  // empty when the ids are not dense
};

struct SimWalkFilter {
  std::function<bool(int step)> want_step;  // empty: every step
  bool top_level_only = false;              // depth 0 only: no link slices inside collectives
};

// One chip's slices in one program run, in the order they were made.
struct SimChipRun {
  int device_id = 0;
  int step = 0;
  int64_t graph_id = -1;
  const std::vector<trace::SimSlice>* slices = nullptr;
  const SimNames* names = nullptr;
  const trace::SimProgram* program = nullptr;  // its collectives' algorithms
};

// Program runs in order, chips in order within each; an error of the
// schedule (a damaged row, a missing program) is returned.
absl::Status ForEachSimChipRun(const Reader& reader, int64_t run_id, const SimWalkFilter& filter,
                               const std::function<void(const SimChipRun&)>& fn);

}  // namespace shardscope::store
