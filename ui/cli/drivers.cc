// Driver commands: `run` drives the whole stack — it opens the database,
// installs the store's writer as the recorder, sets up the virtual chips and
// runs a sample, so everything the stack reports lands in one SQLite file.
#include "ui/cli/drivers.h"

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/cost_model.h"
#include "runtime/gemm.h"
#include "core/shardscope.h"
#include "profiler/trace/recorder.h"
#include "samples/samples.h"
#include "store/writer.h"

namespace shardscope::cli {
namespace {

constexpr const char* kRunHelp =
    "usage: shardscope run SAMPLE --db PATH [--mesh RxC] [--steps N] [--hosts H] [--seed S]\n"
    "                         [--batch B] [--batch-after B] [--change-step K] [--lr LR]\n"
    "                         [--profile cpu|tpu-v4|h100] [--init FILE] [--save FILE]\n"
    "                         [--data FILE] [--eval-every N] [--autocast bf16|f16] [--checkpoint]\n"
    "                         [--sharding dp|fsdp|tp|fsdp_tp|auto]\n"
    "                         [--no-fusion] [--cache-dir DIR] [--quiet]\n"
    "\n"
    "Runs a sample workload on a mesh of virtual chips and records it into PATH\n"
    "(created if missing; an existing shardscope database gains a new run).\n"
    "\n"
    "  --mesh RxC        mesh shape, axes 'data' x 'model' (default 1x1)\n"
    "  --sharding S      llama: dp (batch over the whole mesh), fsdp (axes data x fsdp:\n"
    "                    weights and AdamW moments split over fsdp), tp (weights split\n"
    "                    column/row parallel over model, batch over data) or fsdp_tp\n"
    "                    (axes fsdp x model), or auto (chosen by auto-sharding for the\n"
    "                    lowest modeled step that fits each chip; compared with the\n"
    "                    others in `shardscope sharding`); mlp and cnn are dp (default dp)\n"
    "  --steps N         training steps (default 20)\n"
    "  --hosts H         hosts the chips are spread over (default 1)\n"
    "  --seed S          seed of weights and data (default 0)\n"
    "  --batch B         batch size (mlp 64, llama 8, cnn 32 by default)\n"
    "  --batch-after B, --change-step K\n"
    "                    mlp: the step at which the batch becomes B'\n"
    "                    (defaults 48, 10; --change-step -1 keeps it fixed)\n"
    "  --lr LR           learning rate (default 0.05)\n"
    "  --profile P       target chip of the modeled clock: cpu (this machine,\n"
    "                    calibrated), tpu-v4 or h100 (default cpu)\n"
    "  --data FILE       llama: train on this text file's bytes (last 10% held out)\n"
    "  --eval-every N    llama, cnn: held-out loss every N steps and after the last\n"
    "                    (default 50; 0: never)\n"
    "  --init FILE       start from a safetensors checkpoint (resumes at its step)\n"
    "  --save FILE       write the trained weights (and optimizer state) as a safetensors checkpoint\n"
    "  --stop-at K       stop before step K as if interrupted (schedules still plan for --steps);\n"
    "                    with --save, a later --init FILE resumes at step K\n"
    "  --autocast T      llama, cnn: matmuls and convolutions on T (bf16 or f16) copies\n"
    "                    of their f32 operands, with f32 results and f32 master weights\n"
    "  --checkpoint      llama: gradient checkpointing per layer (activations recomputed\n"
    "                    in backward; the memory_plans table shows the lower peak)\n"
    "  --bucket          recompile_storm: pad each batch's length to its power-of-two\n"
    "                    bucket (what `shardscope recompiles` suggests)\n"
    "  --read-loss-every N  mlp: read the loss mid-step (before the update) every N steps,\n"
    "                    cutting the graph there (default 0: never)\n"
    "  --no-fusion       run every op as its own kernel (fusion is on by default;\n"
    "                    the fusion_decisions table says what was fused and why)\n"
    "  --cache-dir DIR   keep compiled programs in DIR (default $SHARDSCOPE_CACHE_DIR):\n"
    "                    a second run of the same workload compiles nothing\n"
    "  --cache-capacity N  keep at most N programs in memory (default: all); a\n"
    "                    recompiled evicted one is diagnosed as cache_evicted\n"
    "  --quiet           print only the summary line\n"
    "\n"
    "samples:\n";

bool ParseInt(const std::string& s, int64_t* v) { return absl::SimpleAtoi(s, v); }

// The persistent compile cache's directory: the flag, else $SHARDSCOPE_CACHE_DIR, else none.
std::string CacheDir(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("SHARDSCOPE_CACHE_DIR");
  return env ? env : "";
}

int Usage(const std::string& why) {
  std::cerr << "error: run: " << why << "\n" << DriverHelp("run");
  return 2;
}

int Run(const std::vector<std::string>& args) {
  samples::SampleConfig cfg;
  std::string sample, db, profile = "cpu";
  int64_t hosts = 1;
  bool quiet = false, fusion = true, batch_given = false;
  std::string cache_dir;
  size_t cache_capacity = 0;
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string& a = args[k];
    auto value = [&](std::string* out) {
      if (k + 1 >= args.size()) return false;
      *out = args[++k];
      return true;
    };
    std::string v;
    int64_t n = 0;
    if (a == "--quiet") { quiet = true; continue; }
    if (a == "--no-fusion") { fusion = false; continue; }
    if (a == "--checkpoint") { cfg.checkpoint_layers = true; continue; }
    if (a == "--bucket") { cfg.bucket = true; continue; }
    if (a.rfind("--", 0) == 0) {
      if (!value(&v)) return Usage(absl::StrCat(a, " needs a value"));
      if (a == "--db") { db = v; continue; }
      if (a == "--init") { cfg.init_path = v; continue; }
      if (a == "--data") { cfg.data_path = v; continue; }
      if (a == "--sharding") { cfg.sharding = v; continue; }
      if (a == "--cache-dir") { cache_dir = v; continue; }
      if (a == "--cache-capacity") {
        if (!ParseInt(v, &n) || n < 0) return Usage(absl::StrCat("--cache-capacity '", v, "' is not a count"));
        cache_capacity = static_cast<size_t>(n);
        continue;
      }
      if (a == "--save") { cfg.save_path = v; continue; }
      if (a == "--autocast") {
        if (v != "bf16" && v != "f16") return Usage(absl::StrCat("--autocast '", v, "' is not bf16 or f16"));
        cfg.autocast = v;
        continue;
      }
      if (a == "--profile") {
        if (auto p = compiler::FindProfile(v); !p.ok()) return Usage(std::string(p.status().message()));
        profile = v;
        continue;
      }
      if (a == "--mesh") {
        std::vector<std::string> parts = absl::StrSplit(v, 'x');
        int64_t r = 0, c = 0;
        if (parts.size() != 2 || !ParseInt(parts[0], &r) || !ParseInt(parts[1], &c) || r < 1 || c < 1)
          return Usage(absl::StrCat("--mesh '", v, "' is not of the form RxC (e.g. 2x2)"));
        cfg.mesh = {r, c};
        continue;
      }
      if (a == "--lr") {
        if (!absl::SimpleAtod(v, &cfg.lr) || cfg.lr <= 0) return Usage(absl::StrCat("--lr '", v, "' is not a positive number"));
        continue;
      }
      if (!ParseInt(v, &n)) return Usage(absl::StrCat(a, " '", v, "' is not an integer"));
      if (a == "--steps" && n >= 1) cfg.steps = static_cast<int>(n);
      else if (a == "--hosts" && n >= 1) hosts = n;
      else if (a == "--seed" && n >= 0) cfg.seed = static_cast<uint64_t>(n);
      else if (a == "--batch" && n >= 1) cfg.batch = static_cast<int>(n), batch_given = true;
      else if (a == "--batch-after" && n >= 1) cfg.batch_after = static_cast<int>(n);
      else if (a == "--change-step") cfg.change_step = static_cast<int>(n);
      else if (a == "--eval-every" && n >= 0) cfg.eval_every = static_cast<int>(n);
      else if (a == "--stop-at" && n >= 0) cfg.stop_at = static_cast<int>(n);
      else if (a == "--read-loss-every" && n >= 0) cfg.read_loss_every = static_cast<int>(n);
      else return Usage(absl::StrCat("unknown option or bad value: ", a, " ", v));
      continue;
    }
    if (!sample.empty()) return Usage(absl::StrCat("unexpected argument '", a, "'"));
    sample = a;
  }
  if (sample.empty()) return Usage("which sample? (e.g. shardscope run mlp --db run.db)");
  if (db.empty()) return Usage("--db PATH is required");
  const samples::SampleInfo* info = samples::Find(sample);
  if (!info) return Usage(absl::StrCat("unknown sample '", sample, "'"));
  if (batch_given && sample == "cnn") cfg.cnn_batch = cfg.batch;
  if (batch_given && sample == "llama") cfg.llama_batch = cfg.batch;
  std::vector<std::string> axes = {"data", "model"};
  if (sample == "llama") {
    auto a = samples::LlamaMeshAxes(cfg.sharding);
    if (!a.ok()) return Usage(std::string(a.status().message()));
    axes = *a;
  } else if (cfg.sharding != "dp") {
    return Usage(absl::StrCat(sample, " runs data parallel only (--sharding dp), not '", cfg.sharding, "'"));
  }
  int64_t chips = cfg.mesh[0] * cfg.mesh[1];
  if (chips % hosts != 0) return Usage(absl::StrCat(chips, " chips do not split evenly over ", hosts, " hosts"));

  auto writer = store::Writer::Open(db);
  if (!writer.ok()) {
    std::cerr << "error: " << writer.status().message() << "\n";
    return 1;
  }
  trace::ResetHostClock();
  trace::SetRecorder(writer->get());
  std::string mesh_text = absl::StrCat(cfg.mesh[0], "x", cfg.mesh[1]);
  trace::RunRecord run;
  run.sample = sample;
  run.mesh = mesh_text;
  run.mesh_axes = absl::StrJoin(axes, ",");
  run.sharding = cfg.sharding;
  run.config_json = nlohmann::json{{"sample", sample},   {"mesh", mesh_text}, {"steps", cfg.steps},
                                   {"hosts", hosts},      {"seed", cfg.seed},  {"batch", cfg.batch},
                                   {"batch_after", cfg.batch_after}, {"change_step", cfg.change_step},
                                   {"lr", cfg.lr},        {"sharding", cfg.sharding},
                                   {"profile", profile},  {"fusion", fusion},
                                   {"autocast", cfg.autocast}, {"checkpoint", cfg.checkpoint_layers},
                                   {"gemm", runtime::ChosenGemmBackend().Describe()},
                                   {"huge_page_heap", HugePageHeap()},
                                   {"cache_dir", CacheDir(cache_dir)}, {"bucket", cfg.bucket},
                                   {"cache_capacity", cache_capacity},
                                   {"read_loss_every", cfg.read_loss_every}}
                        .dump();
  run.topology = absl::StrCat(hosts, hosts == 1 ? " host x " : " hosts x ", chips / hosts, " chips");
  run.tool_version = SHARDSCOPE_VERSION;
  run.started_at_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  run.num_hosts = static_cast<int>(hosts);
  run.num_devices = static_cast<int>(chips);
  run.profile = profile;
  run.clock_kinds = "host,device,modeled";
  auto run_id = (*writer)->StartRun(run);
  if (!run_id.ok()) {
    trace::SetRecorder(nullptr);
    std::cerr << "error: " << run_id.status().message() << "\n";
    return 1;
  }
  if (absl::Status s = Init({.num_hosts = static_cast<int>(hosts),
                             .chips_per_host = static_cast<int>(chips / hosts),
                             .cache_dir = CacheDir(cache_dir),
                             .cache_capacity = cache_capacity});
      !s.ok()) {
    trace::SetRecorder(nullptr);
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  // The modeled clock's chip, before anything compiles (ops record their cost on it).
  if (absl::Status s = GetClient().SetProfile(profile); !s.ok()) {
    trace::SetRecorder(nullptr);
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  GetClient().set_fusion(fusion);
  // Device records: coordinates in the mesh.
  for (int d = 0; d < chips; ++d) {
    trace::DeviceRecord dr;
    dr.device_id = d;
    dr.host_id = static_cast<int>(d / (chips / hosts));
    dr.coords = absl::StrCat("[", d / cfg.mesh[1], ",", d % cfg.mesh[1], "]");
    dr.hbm_bytes = GetClient().topology().device(d).hbm_bytes();
    dr.peak_flops = GetClient().profile().peak_flops;
    trace::recorder().Record(dr);
  }
  std::string ids;
  for (int d = 0; d < chips; ++d) absl::StrAppend(&ids, d ? "," : "", d);
  trace::recorder().Record(trace::MeshRecord{0, absl::StrCat("[", cfg.mesh[0], ",", cfg.mesh[1], "]"), run.mesh_axes, ids});

  if (!quiet) {
    std::cout << "shardscope run " << sample << " — run " << *run_id << " into " << db << ", mesh " << mesh_text
              << " (data, model), " << run.topology << "\n";
    cfg.on_step = [](int step, double loss) { std::printf("  step %3d  loss %.4f\n", step, loss); };
  }
  // A write error (a full disk, a lock held too long) stops the run at once; what was committed stays readable.
  cfg.on_step = [print = cfg.on_step, w = writer->get()](int step, double loss) {
    if (print) print(step, loss);
    if (!w->failed()) return;
    w->EndRun();  // 'incomplete', where the file still takes it
    std::fflush(stdout);
    std::cerr << "error: " << w->status().message() << "\n(the run stopped after step " << step
              << "; what was committed before the error stays readable)\n";
    std::_Exit(1);
  };
  auto t0 = std::chrono::steady_clock::now();
  auto result = info->run(cfg);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Shutdown();
  (*writer)->EndRun();
  absl::Status stored = (*writer)->status();
  trace::SetRecorder(nullptr);
  if (!result.ok()) {
    std::cerr << "error: " << result.status().message() << "\n";
    std::cerr << "(what ran before the error is stored in " << db << ", run " << *run_id << ")\n";
    return 1;
  }
  if (!stored.ok()) {
    std::cerr << "error: writing " << db << ": " << stored.message() << "\n";
    return 1;
  }
  std::printf("run %lld: %s, steps %d-%d in %.2f s (host clock), final loss %.4f — stored in %s\n",
              static_cast<long long>(*run_id), sample.c_str(), result->first_step,
              result->first_step + static_cast<int>(result->losses.size()) - 1, secs,
              result->losses.empty() ? 0.0 : result->losses.back(), db.c_str());
  return 0;
}

}  // namespace

bool IsDriverCommand(const std::string& command) { return command == "run"; }

std::string DriverHelp(const std::string& command) {
  if (command != "run") return "";
  std::string h = kRunHelp;
  for (const auto& s : samples::Registry()) absl::StrAppend(&h, "  ", s.name, "  ", s.description, "\n");
  return h;
}

namespace {
constexpr char kHugeTunable[] = "glibc.malloc.hugetlb=1";
}  // namespace

bool HugePageHeap() {
  const char* t = std::getenv("GLIBC_TUNABLES");
  return t != nullptr && std::strstr(t, kHugeTunable) != nullptr;
}

void ReexecWithHugePages(char** argv) {
  // Measured side by side (3 alternating llama runs each): median step
  // 95/96/93 ms on 4 KiB pages vs 92/90/86 ms, fused kernels 27.3 -> 22.5 ms
  // per step. Every 4 KiB page of a streamed buffer costs a nested page walk
  // in this VM; PyTorch, which reuses its buffers, gains nothing from it.
  const char* off = std::getenv("SHARDSCOPE_HUGEPAGES");
  const char* set = std::getenv("GLIBC_TUNABLES");
  // Already chosen, either way, by whoever started us: keep their choice.
  if (set != nullptr && std::strstr(set, "glibc.malloc.hugetlb=") != nullptr) return;
  if (off != nullptr && std::strcmp(off, "0") == 0) return;
  const char* env = std::getenv("GLIBC_TUNABLES");
  const bool had = env != nullptr;
  const std::string old = had ? env : "";
  const std::string tunables = old.empty() ? std::string(kHugeTunable) : absl::StrCat(old, ":", kHugeTunable);
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: exec failed (no /proc, say). Run on, without huge pages.
  if (had) setenv("GLIBC_TUNABLES", old.c_str(), 1);
  else unsetenv("GLIBC_TUNABLES");
}

int RunDriverCommand(const std::string& command, const std::vector<std::string>& args) {
  // Keep freed memory in the process: fresh pages fault slowly on these
  // machines. One arena: a per-thread arena's heap is unmapped whenever it
  // empties, whatever the trim threshold, and the chips' threads empty theirs
  // every step.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_ARENA_MAX, 1);
  if (command == "run") return Run(args);
  std::cerr << "error: unknown driver command '" << command << "'\n";
  return 2;
}

}  // namespace shardscope::cli
