// The llama sample: a Llama-style decoder over bytes (vocabulary 256) —
// token embedding, pre-norm blocks of RMSNorm + causal multi-head attention
// with RoPE and RMSNorm + SwiGLU, a final norm and an output head — trained
// with AdamW on next-byte prediction. Data: a text file (`--data`; its last
// 10% held out for the eval loss) or synthetic text with learnable structure.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <map>
#include <random>
#include <regex>
#include <source_location>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/shardscope.h"
#include "samples/common.h"
#include "samples/samples.h"

namespace shardscope::samples {
namespace ss = shardscope;

namespace {

// Synthetic text: sentences drawn from a small vocabulary of words with a
// fixed word-to-word chain, so the next byte is predictable within a word and
// partly across words.
std::string SyntheticText(size_t bytes, uint64_t seed) {
  const std::vector<std::string> words = {"the", "quick", "brown", "fox", "jumps", "over", "lazy",
                                          "dog", "and", "runs", "far", "away", "from", "home", "today"};
  std::mt19937_64 rng(seed);
  std::string out;
  size_t w = 0;
  while (out.size() < bytes) {
    out += words[w];
    out += (rng() % 8 == 0) ? ". " : " ";
    w = (w * 7 + 3 + rng() % 2) % words.size();
  }
  out.resize(bytes);
  return out;
}

struct Corpus {
  std::string train, held_out;
};

// The bytes of `path`, a regular file of at most kMaxDataBytes, read a piece
// at a time: a FIFO, a device (/dev/zero) or a directory is refused before a
// byte is read, and a file that grows past the limit while read stops there.
absl::StatusOr<std::string> ReadDataFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("--data ", path, " cannot be opened: ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return absl::NotFoundError(absl::StrCat("--data ", path, " cannot be read: ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("--data ", path, " is ",
                                                   S_ISDIR(st.st_mode)    ? "a directory"
                                                   : S_ISFIFO(st.st_mode) ? "a FIFO"
                                                   : S_ISCHR(st.st_mode)  ? "a character device"
                                                   : S_ISBLK(st.st_mode)  ? "a block device"
                                                   : S_ISSOCK(st.st_mode) ? "a socket"
                                                                          : "a special file",
                                                   ", not a regular file of text"));
  const std::string too_big = absl::StrCat("--data ", path, " is larger than the ", kMaxDataBytes >> 20,
                                           " MiB the llama sample keeps in memory");
  if (st.st_size > kMaxDataBytes) return absl::InvalidArgumentError(absl::StrCat(too_big, " (", st.st_size, " bytes)"));
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char piece[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, piece, sizeof piece);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(absl::StrCat("--data ", path, ": reading failed: ", std::strerror(errno)));
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) + n > kMaxDataBytes) return absl::InvalidArgumentError(too_big);
    text.append(piece, static_cast<size_t>(n));
  }
  return text;
}

absl::StatusOr<Corpus> LoadCorpus(const SampleConfig& cfg) {
  std::string text;
  if (!cfg.data_path.empty()) {
    auto bytes = ReadDataFile(cfg.data_path);
    if (!bytes.ok()) return bytes.status();
    text = *std::move(bytes);
  } else {
    text = SyntheticText(200000, cfg.seed + 7);
  }
  size_t cut = text.size() * 9 / 10;
  Corpus c{text.substr(0, cut), text.substr(cut)};
  size_t need = static_cast<size_t>(cfg.seq) + 1;
  if (c.train.size() < need || c.held_out.size() < need)
    return absl::InvalidArgumentError(absl::StrCat("--data ", cfg.data_path, " has ", text.size(),
                                                   " bytes; it needs at least ", need * 10,
                                                   " so that both parts hold one sequence of ", need));
  return c;
}

// A batch of byte windows: inputs [B, T] and next-byte targets [B*T].
std::pair<ss::Tensor, ss::Tensor> Batch(const std::string& text, int64_t batch, int64_t seq, std::mt19937_64& rng) {
  std::vector<int32_t> in(batch * seq), tgt(batch * seq);
  std::uniform_int_distribution<size_t> start(0, text.size() - static_cast<size_t>(seq) - 1);
  for (int64_t b = 0; b < batch; ++b) {
    size_t s = start(rng);
    for (int64_t t = 0; t < seq; ++t) {
      in[b * seq + t] = static_cast<unsigned char>(text[s + t]);
      tgt[b * seq + t] = static_cast<unsigned char>(text[s + t + 1]);
    }
  }
  ss::Tensor x = ss::Tensor::from_host(Literal::FromI32({batch, seq}, in), "tokens");
  ss::Tensor y = ss::Tensor::from_host(Literal::FromI32({batch * seq}, tgt), "targets");
  return {x, y};
}

struct Block {
  Block(const SampleConfig& c, int i)
      : attn_norm(c.d_model, absl::StrCat("layers.", i, ".attn_norm")),
        attn(c.d_model, c.heads, absl::StrCat("layers.", i, ".attn"), true, true, c.seed),
        mlp_norm(c.d_model, absl::StrCat("layers.", i, ".mlp_norm")),
        mlp(c.d_model, c.ffn, absl::StrCat("layers.", i, ".mlp"), c.seed) {}
  ss::Tensor operator()(const ss::Tensor& h) const {
    ss::Tensor a = ss::add(h, attn(attn_norm(h)));
    return ss::add(a, mlp(mlp_norm(a)));
  }
  ss::nn::RMSNorm attn_norm;
  ss::nn::MultiHeadAttention attn;
  ss::nn::RMSNorm mlp_norm;
  ss::nn::SwiGLU mlp;
};

struct Model {
  explicit Model(const SampleConfig& c)
      : embed(256, c.d_model, "embed", c.seed), norm(c.d_model, "norm"), head(c.d_model, 256, "lm_head", c.seed),
        autocast(AutocastType(c).value_or(std::nullopt)), checkpoint(c.checkpoint_layers) {
    for (int i = 0; i < c.layers; ++i) blocks.push_back(std::make_unique<Block>(c, i));
  }
  ss::Tensor loss(const ss::Tensor& tokens, const ss::Tensor& targets) const {
    // Mixed precision: every matmul on bf16 copies of its operands, f32 out.
    ss::AutocastGuard mixed(autocast);
    ss::Tensor h = embed(tokens);
    for (const auto& b : blocks) {
      const Block& block = *b;
      // Checkpointed, a layer keeps only its input for backward.
      h = checkpoint ? ss::remat([&](const ss::Tensor& x) { return block(x); }, h) : block(h);
    }
    ss::Tensor logits = head(norm(h));  // [B, T, 256]
    const auto& d = logits.shape().dims;
    return ss::cross_entropy(ss::reshape(logits, {d[0] * d[1], d[2]}), targets);
  }
  std::vector<ss::Tensor*> parameters() {
    std::vector<ss::Tensor*> out = embed.parameters();
    for (auto& b : blocks)
      for (ss::nn::Module* m : std::vector<ss::nn::Module*>{&b->attn_norm, &b->attn, &b->mlp_norm, &b->mlp})
        for (ss::Tensor* p : m->parameters()) out.push_back(p);
    for (ss::Tensor* p : norm.parameters()) out.push_back(p);
    for (ss::Tensor* p : head.parameters()) out.push_back(p);
    return out;
  }
  ss::nn::Embedding embed;
  std::vector<std::unique_ptr<Block>> blocks;
  ss::nn::RMSNorm norm;
  ss::nn::Linear head;
  std::optional<DType> autocast;
  bool checkpoint = false;
};

// The [B*T] targets split as the [B, T] batch's rows are: left to propagation
// they stayed whole on every chip, and so did their one-hot [B*T, vocab],
// which grew each chip's memory with the pod (1181 MiB a chip at 4096 chips).
// Only when the rows split evenly: an uneven split of B*T cuts elsewhere than
// the rows' (3 of 8 rows a chip is not 3/8 of B*T), and the logits would be
// gathered whole to meet it.
std::vector<ss::AxisSpec> TargetsSpec(const ss::Mesh& mesh, const std::vector<ss::AxisSpec>& batch,
                                      int64_t rows) {
  if (batch.empty() || batch[0].is_none()) return {ss::none};
  int64_t split = 1;
  for (const ss::AxisSpec::Axis& a : batch[0].axes())
    for (size_t k = 0; k < mesh.axis_names().size(); ++k)
      if ((a.name && *a.name == mesh.axis_names()[k]) || a.index == static_cast<int>(k))
        split *= mesh.shape()[k];
  return {rows % split == 0 ? batch[0] : ss::none};
}

// Held-out loss: the mean over fixed windows of the held-out text (no backward).
absl::StatusOr<double> EvalLoss(const Model& model, const std::string& held_out, const SampleConfig& cfg,
                                const ss::Mesh& mesh, const std::vector<ss::AxisSpec>& batch_spec) {
  std::mt19937_64 rng(12345);  // the same windows every time
  // Evaluation cuts belong to the training step they follow (mark_step has
  // moved the count to the next): each, and the read of its value, is recorded
  // under that step's number, and the count goes on where it was.
  const int step = ss::current_step();
  double total = 0;
  const int batches = 2;
  for (int k = 0; k < batches; ++k) {
    auto [x, y] = Batch(held_out, cfg.llama_batch, cfg.seq, rng);
    if (auto s = ss::mark_sharding(x, mesh, batch_spec); !s.ok()) return s;
    if (const auto spec = TargetsSpec(mesh, batch_spec, cfg.llama_batch);
        !spec[0].is_none())  // as the rows are
      if (auto s = ss::mark_sharding(y, mesh, spec); !s.ok()) return s;
    ss::Tensor loss = model.loss(x, y);
    ss::set_current_step(step - 1);
    if (auto s = ss::mark_step(); !s.ok()) return s;
    ss::set_current_step(step - 1);  // its value's read too
    auto v = loss.item();
    if (!v.ok()) return v.status();
    total += *v;
  }
  ss::set_current_step(step);
  return total / batches;
}

// How `--sharding` lays the step out on an R x C mesh (README "Sharding
// strategies"). Weights are [out, in] (nn::Linear).
//   dp       axes (data, model): the batch over both; weights whole on every chip.
//   fsdp     axes (data, fsdp): the batch over both; every weight and its AdamW
//            moments split along dim 0 over fsdp (gathered where used).
//   tp       axes (data, model): the batch over data; attention q/k/v and SwiGLU
//            gate/up split by output (column parallel), o_proj and down by input
//            (row parallel) over model; the rest whole.
//   fsdp_tp  axes (fsdp, model): tp's splits over model, the other dim of each
//            weight (dim 0 of the rest) over fsdp; the batch over fsdp.
//   auto     axes (data, model): chosen by auto-sharding when the first step
//            is traced, per role (a weight, its AdamW moments and the same
//            weight of every layer share one layout; the tokens; the targets).
struct Strategy {
  std::vector<std::string> axis_names;
  std::vector<ss::AxisSpec> batch;  // of the [B, T] token batch
  std::string name;
  std::vector<ss::AxisSpec> Targets(const ss::Mesh& mesh, int64_t rows) const {
    return TargetsSpec(mesh, batch, rows);
  }
  std::map<std::string, std::vector<ss::AxisSpec>> auto_specs;  // auto, once chosen: by Role

  bool is_auto() const { return name == "auto"; }
  static constexpr const char* kHand[] = {"dp", "fsdp", "tp", "fsdp_tp"};

  static absl::StatusOr<Strategy> Find(const std::string& name) {
    if (name == "dp") return Strategy{{"data", "model"}, {ss::axes("data", "model"), ss::none}, name};
    if (name == "fsdp") return Strategy{{"data", "fsdp"}, {ss::axes("data", "fsdp"), ss::none}, name};
    if (name == "tp") return Strategy{{"data", "model"}, {"data", ss::none}, name};
    if (name == "fsdp_tp") return Strategy{{"fsdp", "model"}, {"fsdp", ss::none}, name};
    if (name == "auto") return Strategy{{"data", "model"}, {ss::none, ss::none}, name};
    return absl::InvalidArgumentError(absl::StrCat("llama: unknown sharding strategy '", name,
                                                   "' (dp, fsdp, tp, fsdp_tp, auto)"));
  }

  // The role of an input of the step: its name without the layer number and
  // the optimizer's prefix ("adamw.m.layers.3.mlp.up_proj.weight" ->
  // "layers.*.mlp.up_proj.weight").
  static std::string Role(const std::string& input) {
    std::string r = input;
    for (const char* prefix : {"adamw.m.", "adamw.v."})
      if (absl::StartsWith(r, prefix)) r = r.substr(std::string(prefix).size());
    static const std::regex kLayer(R"(layers\.\d+\.)");
    return std::regex_replace(r, kLayer, "layers.*.");
  }

  // The spec of the parameter named `name` (e.g. "layers.0.attn.q_proj.weight").
  std::vector<ss::AxisSpec> Param(const std::string& pname, int rank) const {
    std::vector<ss::AxisSpec> spec(rank, ss::none);
    if (is_auto()) {
      auto it = auto_specs.find(Role(pname));
      return it != auto_specs.end() && static_cast<int>(it->second.size()) == rank ? it->second : spec;
    }
    const bool fsdp = name == "fsdp" || name == "fsdp_tp";
    const bool tp = name == "tp" || name == "fsdp_tp";
    auto has = [&](const char* part) { return absl::StrContains(pname, part); };
    const bool column = has("q_proj.") || has("k_proj.") || has("v_proj.") || has("gate_proj.") || has("up_proj.");
    const bool row = has("o_proj.") || has("down_proj.");
    if (tp && column) {
      spec[0] = "model";
      if (fsdp && rank == 2) spec[1] = "fsdp";
    } else if (tp && row && rank == 2) {
      spec[1] = "model";
      if (fsdp) spec[0] = "fsdp";
    } else if (fsdp && rank >= 1) {
      spec[0] = "fsdp";
    }
    return spec;
  }
};

// What training carries from step to step: the mesh, the text, the model and
// its optimizer. RunLlama drives it; LlamaTrainingStep lends out one step.
struct Trainer {
  Trainer(const SampleConfig& c, Strategy st, ss::Mesh m, Corpus text)
      : cfg(c),
        strategy(std::move(st)),
        mesh(std::move(m)),
        corpus(std::move(text)),
        model(c),
        params(model.parameters()),
        opt(params, {.lr = c.llama_lr, .weight_decay = 0.01}),
        sched{.peak = c.llama_lr, .warmup_steps = std::min(20, c.steps / 10), .total_steps = c.steps,
              .floor = c.llama_lr / 10} {}

  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const SampleConfig& cfg) {
    auto strategy = Strategy::Find(cfg.sharding);
    if (!strategy.ok()) return strategy.status();
    auto mesh = SampleMesh(cfg, strategy->axis_names);
    if (!mesh.ok()) return mesh.status();
    auto corpus = LoadCorpus(cfg);
    if (!corpus.ok()) return corpus.status();
    if (auto t = AutocastType(cfg); !t.ok()) return t.status();
    auto t = std::make_unique<Trainer>(cfg, *std::move(strategy), *std::move(mesh), *std::move(corpus));
    if (auto s = t->ShardParameters(); !s.ok()) return s;
    return t;
  }

  // Lays out each parameter and its AdamW moments by the strategy (again
  // after a checkpoint replaced their values).
  absl::Status ShardParameters() {
    std::vector<ss::Tensor*> state = opt.state();  // m, v per parameter, in order
    for (size_t k = 0; k < params.size(); ++k) {
      const std::vector<ss::AxisSpec> spec = strategy.Param(params[k]->name(), params[k]->rank());
      for (ss::Tensor* t : {params[k], state[2 * k], state[2 * k + 1]})
        if (auto s = Lay(*t, spec); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // mark_sharding, or under auto the layout auto-sharding chose (recorded so).
  absl::Status Lay(ss::Tensor& t, const std::vector<ss::AxisSpec>& spec,
                   std::source_location sl = std::source_location::current()) {
    if (!strategy.is_auto()) return ss::mark_sharding(t, mesh, spec, sl);
    auto s = mesh.ToSharding(spec, t.rank());
    if (!s.ok()) return s.status();
    return ss::apply_auto_sharding(t, *s, sl);
  }

  // Auto-sharding of the step just traced (the first): its inputs are laid
  // out as chosen before it runs; the hand-written strategies are scored on
  // the same graph for the log and the database.
  absl::Status ChooseAutoSharding() {
    std::vector<ss::HandStrategy> hand;
    for (const char* name : Strategy::kHand) {
      auto h = Strategy::Find(name);
      if (!h.ok()) return h.status();
      auto m = ss::Mesh::Create(mesh.device_ids(), mesh.shape(), h->axis_names);
      if (!m.ok()) return m.status();
      hand.push_back({name, *m, [h = *h, m = *m, rows = cfg.llama_batch](const std::string& input, int rank) {
                        if (input == "tokens") return h.batch;
                        if (input == "targets")
                          return rank == 1 ? h.Targets(m, rows) : std::vector<ss::AxisSpec>(rank, ss::none);
                        return h.Param(input, rank);
                      }});
    }
    auto c = ss::auto_shard_pending_step(mesh, Strategy::Role, hand);
    if (!c.ok()) return c.status();
    strategy.auto_specs = c->spec_of_group;
    if (auto it = strategy.auto_specs.find("tokens"); it != strategy.auto_specs.end()) strategy.batch = it->second;
    if (!cfg.quiet) std::printf("%s", ss::DescribeAutoSharding(*c, ss::GetClient().profile().name).c_str());
    return absl::OkStatus();
  }

  // Records training step `step` — a batch, forward, backward, global-norm
  // clipping, the AdamW update — and returns its loss, pending: the caller cuts.
  absl::StatusOr<ss::Tensor> TraceStep(int step) {
    std::mt19937_64 rng(cfg.seed * 1000003 + static_cast<uint64_t>(step));
    auto [x, y] = Batch(corpus.train, cfg.llama_batch, cfg.seq, rng);
    if (auto s = Lay(x, strategy.batch); !s.ok()) return s;
    if (auto it = strategy.auto_specs.find("targets"); it != strategy.auto_specs.end()) {
      if (auto s = Lay(y, it->second); !s.ok()) return s;
    } else if (!strategy.is_auto()) {
      if (auto s = Lay(y, strategy.Targets(mesh, cfg.llama_batch)); !s.ok()) return s;
    }
    opt.set_lr(sched.at(step));
    ss::Tensor loss = model.loss(x, y);
    if (auto s = ss::backward(loss); !s.ok()) return s;
    ss::optim::clip_grad_norm(params, 1.0);
    if (auto s = opt.step(); !s.ok()) return s;
    if (strategy.is_auto() && strategy.auto_specs.empty())
      if (auto s = ChooseAutoSharding(); !s.ok()) return s;
    return loss;
  }

  SampleConfig cfg;
  Strategy strategy;
  ss::Mesh mesh;
  Corpus corpus;
  Model model;
  std::vector<ss::Tensor*> params;
  ss::optim::AdamW opt;
  ss::optim::WarmupCosine sched;
};

}  // namespace

struct LlamaTrainingStep::State {
  std::unique_ptr<Trainer> trainer;
};

LlamaTrainingStep::LlamaTrainingStep(std::unique_ptr<State> s) : s_(std::move(s)) {}
LlamaTrainingStep::~LlamaTrainingStep() = default;

absl::StatusOr<std::unique_ptr<LlamaTrainingStep>> LlamaTrainingStep::Create(const SampleConfig& cfg) {
  auto t = Trainer::Create(cfg);
  if (!t.ok()) return t.status();
  auto state = std::make_unique<State>();
  state->trainer = *std::move(t);
  return std::unique_ptr<LlamaTrainingStep>(new LlamaTrainingStep(std::move(state)));
}

absl::Status LlamaTrainingStep::Trace(int step) { return s_->trainer->TraceStep(step).status(); }

absl::StatusOr<std::vector<std::string>> LlamaMeshAxes(const std::string& sharding) {
  auto st = Strategy::Find(sharding);
  if (!st.ok()) return st.status();
  return st->axis_names;
}

absl::StatusOr<SampleResult> RunLlama(const SampleConfig& cfg) {
  auto trainer = Trainer::Create(cfg);
  if (!trainer.ok()) return trainer.status();
  Trainer& tr = **trainer;
  const ss::Mesh& mesh = tr.mesh;
  Model& model = tr.model;
  std::vector<ss::Tensor*>& params = tr.params;
  ss::optim::AdamW& opt = tr.opt;
  // Checkpoints hold the weights and AdamW's moments, so a resumed run
  // continues exactly where the saved one stopped.
  std::vector<ss::Tensor*> saved = params;
  for (ss::Tensor* t : opt.state()) saved.push_back(t);
  SampleResult result;
  auto first = ResumeFromCheckpoint(cfg, saved, "llama");
  if (!first.ok()) return first.status();
  if (auto s = tr.ShardParameters(); !s.ok()) return s;
  result.first_step = *first;
  opt.set_steps_taken(result.first_step);
  const int end = cfg.stop_at >= 0 ? std::min(cfg.stop_at, cfg.steps) : cfg.steps;
  LossLog losses(cfg, &result);
  for (int step = result.first_step; step < end; ++step) {
    auto traced = tr.TraceStep(step);
    if (!traced.ok()) return traced.status();
    ss::Tensor loss = *std::move(traced);
    if (auto s = ss::mark_step(); !s.ok()) return s;
    if (auto s = losses.Push(step, std::move(loss)); !s.ok()) return s;
    if (cfg.eval_every > 0 && ((step + 1) % cfg.eval_every == 0 || step + 1 == end)) {
      auto e = EvalLoss(model, tr.corpus.held_out, cfg, mesh, tr.strategy.batch);
      if (!e.ok()) return e.status();
      if (auto s = losses.Flush(*e); !s.ok()) return s;
    }
  }
  if (auto s = losses.Flush(); !s.ok()) return s;
  if (auto s = SaveCheckpoint(cfg, saved, end, "llama"); !s.ok()) return s;
  return result;
}

}  // namespace shardscope::samples
