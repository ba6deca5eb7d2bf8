// Sample workloads, written against core/ the way a user would write them.
// The CLI's `run` driver picks one by name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardscope::samples {

struct SampleConfig {
  int steps = 20;
  std::vector<int64_t> mesh = {1, 1};              // mesh shape, axes "data", "model"
  // The chip at each mesh position, row-major over `mesh` (`run --mesh-map`,
  // runtime/mesh_mapping.h); empty: chips 0..N-1 in order.
  std::vector<int64_t> mesh_device_ids;
  std::string sharding = "dp";                      // strategy: llama has dp, fsdp, tp, fsdp_tp
  uint64_t seed = 0;
  // mlp: the batch size, and the step at which it changes to `batch_after`
  // (the demo's one recompilation); change_step < 0 keeps it fixed.
  int batch = 64;
  int batch_after = 48;
  int change_step = 10;
  double lr = 0.05;
  // Checkpoints (safetensors): start from `init_path` (its weights, and its
  // step if it records one, so training resumes where it stopped), and write
  // the weights to `save_path` at the end.
  std::string init_path;
  std::string save_path;
  // Stop before this step (as if interrupted) while schedules still plan for
  // `steps`; the checkpoint then resumes here. -1: run to `steps`.
  int stop_at = -1;
  // llama: a text file to train on (bytes; the last 10% held out), else
  // synthetic text; held-out loss every `eval_every` steps (0: never).
  std::string data_path;
  int eval_every = 50;
  // llama's shape (the configuration by default; tests shrink it).
  int64_t layers = 2, d_model = 256, heads = 4, ffn = 1024, seq = 128, llama_batch = 8;
  double llama_lr = 3e-3;
  // llama: matmuls in mixed precision ("bf16" or "f16": 16-bit operands, f32
  // results, f32 master weights; "" keeps f32), and gradient checkpointing of
  // each layer (its activations recomputed in backward instead of kept).
  std::string autocast;
  bool checkpoint_layers = false;
  // cnn: the batch (split over the 'data' axis); --lr sets its SGD rate.
  int cnn_batch = 32;
  // recompile_storm: pad each batch's length to its power-of-two bucket.
  bool bucket = false;
  // mlp: read the loss mid-step (after backward, before the optimizer's
  // update) at the first step and every N steps after, as a logging line
  // would; each read cuts the graph (value_read_cut). 0: never.
  int read_loss_every = 0;
  std::function<void(int step, double loss)> on_step;  // progress callback
  bool quiet = false;  // print nothing of its own (llama's auto-sharding table among)
};

struct SampleResult {
  std::vector<double> losses;  // one per step run
  int first_step = 0;          // the step of losses[0]
  std::vector<std::pair<int, double>> eval_losses;  // (step, held-out loss)
};

struct SampleInfo {
  std::string name;
  std::string description;
  std::function<absl::StatusOr<SampleResult>(const SampleConfig&)> run;
  // The `shardscope run` flags this sample reads beyond those every sample
  // takes (--db, --mesh, --steps, --hosts, --seed, --sharding, --profile and
  // the runtime's): `run` refuses the others, lists these in its help, and
  // records only these in the run's config.
  std::vector<std::string> flags;
  // The largest batch (--batch, --batch-after) that fits this machine's memory.
  int max_batch = 0;
};

// The largest --data file the llama sample reads (it keeps every byte in memory).
inline constexpr int64_t kMaxDataBytes = int64_t{256} << 20;

// The mlp sample: 784-1024-1024-10 classifier, SGD, data parallel over 'data'.
absl::StatusOr<SampleResult> RunMlp(const SampleConfig& cfg);

// The llama sample: a Llama-style byte-level decoder trained with AdamW.
absl::StatusOr<SampleResult> RunLlama(const SampleConfig& cfg);

// The mesh axis names of a llama sharding strategy (an error names the
// strategies there are).
absl::StatusOr<std::vector<std::string>> LlamaMeshAxes(const std::string& sharding);

// One training step of the llama sample, recorded but not cut: what RunLlama
// records before each mark_step (a batch, forward, backward, clipping, the
// AdamW update), on the model and optimizer this object keeps across steps.
// The caller cuts (mark_step), so benchmarks can time the lowering, the
// fingerprint, the cache lookup and the compilation of the sample's own graph.
// Needs Init with at least cfg.mesh[0] * cfg.mesh[1] chips.
class LlamaTrainingStep {
 public:
  static absl::StatusOr<std::unique_ptr<LlamaTrainingStep>> Create(const SampleConfig& cfg);
  ~LlamaTrainingStep();
  absl::Status Trace(int step);

 private:
  struct State;
  explicit LlamaTrainingStep(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// The cnn sample: a small ResNet (BatchNorm, residual blocks, global average
// pooling) on synthetic 32x32 images, SGD with momentum, data parallel.
absl::StatusOr<SampleResult> RunCnn(const SampleConfig& cfg);

// The recompile_storm sample: batches of random lengths 8..48, a new graph per
// length; cfg.bucket pads them to power-of-two buckets (samples/storm.cc).
absl::StatusOr<SampleResult> RunRecompileStorm(const SampleConfig& cfg);

const std::vector<SampleInfo>& Registry();
const SampleInfo* Find(const std::string& name);

}  // namespace shardscope::samples
