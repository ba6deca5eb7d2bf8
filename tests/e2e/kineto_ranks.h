// Kineto-shaped traces of an NCCL job, one file per rank, with known truth:
// per step each rank launches `kernels` GEMMs on stream 7 (100 us each,
// `factor` times as long on the slow rank), then one all_reduce per process
// group on stream 20, whose kernels end together on every member. Options
// move a rank's clock, slow its GPU, or stall its host before the launches.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace shardscope::e2e {

struct KinetoJob {
  int ranks = 4;
  int steps = 10;
  int kernels = 6;
  int slow = -1;              // the rank whose GEMMs take `factor` as long
  double factor = 1.0;
  double host_delay_us = 0;   // the slow rank's host stalls this long before each step's launches
  std::vector<double> offsets_us;  // added to each rank's timestamps (its clock)
  bool tp_dp = false;         // groups {0,1},{2,3} (tp) and {0,2},{1,3} (dp) instead of the world
  int stream_of_kernel = -1;  // >= 0: GEMM number k runs on stream 8 instead of 7
};

// Writes rank0.json ... into `dir` (which must exist); returns the paths, space-separated.
inline std::string WriteKinetoJob(const std::string& dir, const KinetoJob& job) {
  const int n = job.ranks;
  std::vector<nlohmann::json> ev(n, nlohmann::json::array());
  std::vector<double> host(n, 100), gpu(n, 100);
  std::vector<int> corr(n, 1000), ext(n, 1);
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  if (job.tp_dp) {
    for (int i = 0; i < n / 2; ++i) groups.push_back({absl::StrCat("tp", i), {2 * i, 2 * i + 1}});
    for (int i = 0; i < 2; ++i) {
      std::vector<int> m;
      for (int r = i; r < n; r += 2) m.push_back(r);
      groups.push_back({absl::StrCat("dp", i), m});
    }
  } else {
    std::vector<int> all;
    for (int r = 0; r < n; ++r) all.push_back(r);
    groups.push_back({"0", all});
  }
  std::map<std::pair<std::string, int>, int> seq;
  auto x = [&](int r, nlohmann::json e) {
    e["ph"] = "X";
    ev[r].push_back(std::move(e));
  };
  for (int s = 0; s < job.steps; ++s) {
    std::vector<size_t> step_event(n);
    for (int r = 0; r < n; ++r) {
      step_event[r] = ev[r].size();
      x(r, {{"cat", "user_annotation"}, {"name", absl::StrCat("ProfilerStep#", s)}, {"pid", 1000 + r},
            {"tid", 1000 + r}, {"ts", host[r]}, {"dur", 0.0}, {"args", nlohmann::json::object()}});
      if (r == job.slow && job.host_delay_us > 0) {
        x(r, {{"cat", "cpu_op"}, {"name", "dataloader_next"}, {"pid", 1000 + r}, {"tid", 1000 + r}, {"ts", host[r]},
              {"dur", job.host_delay_us - 1}, {"args", nlohmann::json::object()}});
        host[r] += job.host_delay_us;
      }
      for (int k = 0; k < job.kernels; ++k) {
        const double d = 100.0 * (r == job.slow ? job.factor : 1.0);
        const double launch = host[r] + 2;
        const int c = corr[r]++;
        x(r, {{"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1000 + r}, {"tid", 1000 + r}, {"ts", host[r]},
              {"dur", 8.0}, {"args", {{"External id", ext[r]}}}});
        x(r, {{"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1000 + r}, {"tid", 1000 + r},
              {"ts", launch}, {"dur", 4.0}, {"args", {{"correlation", c}, {"External id", ext[r]}}}});
        ++ext[r];
        const double start = std::max(gpu[r], launch + 5);
        const int stream = k == job.stream_of_kernel ? 8 : 7;
        x(r, {{"cat", "kernel"}, {"name", absl::StrCat("gemm_kernel_", k)}, {"pid", 0}, {"tid", stream},
              {"ts", start}, {"dur", d}, {"args", {{"device", 0}, {"stream", stream}, {"correlation", c}}}});
        gpu[r] = start + d;
        host[r] += 10;
      }
    }
    for (const auto& [name, members] : groups) {
      std::map<int, std::pair<double, int>> arrive;
      for (int r : members) {
        const int c = corr[r]++;
        const int sq = ++seq[{name, r}];
        x(r, {{"cat", "cpu_op"}, {"name", "nccl:all_reduce"}, {"pid", 1000 + r}, {"tid", 1000 + r}, {"ts", host[r]},
              {"dur", 10.0},
              {"args",
               {{"External id", ext[r]}, {"Process Group Name", name}, {"Process Group Ranks", members},
                {"In msg nelems", 1 << 20}, {"Out msg nelems", 1 << 20}, {"dtype", "Float"}, {"Seq", sq}}}});
        x(r, {{"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1000 + r}, {"tid", 1000 + r},
              {"ts", host[r] + 2}, {"dur", 4.0}, {"args", {{"correlation", c}, {"External id", ext[r]}}}});
        ++ext[r];
        arrive[r] = {std::max(gpu[r], host[r] + 7), c};
        host[r] += 12;
      }
      double end = 0;
      for (const auto& [r, a] : arrive) end = std::max(end, a.first);
      end += 200;
      for (const auto& [r, a] : arrive) {
        x(r, {{"cat", "kernel"}, {"name", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"},
              {"pid", 0}, {"tid", 20}, {"ts", a.first}, {"dur", end - a.first},
              {"args", {{"device", 0}, {"stream", 20}, {"correlation", a.second}}}});
        gpu[r] = end;
      }
    }
    for (int r = 0; r < n; ++r) {
      host[r] = std::max(host[r], gpu[r]) + 20;
      ev[r][step_event[r]]["dur"] = host[r] - ev[r][step_event[r]]["ts"].get<double>() - 5;
    }
  }
  std::string paths;
  for (int r = 0; r < n; ++r) {
    const double off = r < static_cast<int>(job.offsets_us.size()) ? job.offsets_us[r] : 0.0;
    for (auto& e : ev[r]) e["ts"] = e["ts"].get<double>() + off;
    nlohmann::json doc = {{"schemaVersion", 1},
                          {"deviceProperties", {{{"id", 0}, {"name", "NVIDIA H100"}, {"totalGlobalMem", 85045870592}}}},
                          {"distributedInfo", {{"backend", "nccl"}, {"rank", r}, {"world_size", n}}},
                          {"baseTimeNanoseconds", 1700000000000000000},
                          {"traceEvents", ev[r]}};
    const std::string path = absl::StrCat(dir, "/rank", r, ".json");
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      const std::string text = doc.dump();
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
    absl::StrAppend(&paths, r ? " " : "", path);
  }
  return paths;
}

}  // namespace shardscope::e2e
