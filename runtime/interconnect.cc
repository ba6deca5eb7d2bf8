// Interconnect (see interconnect.h).
#include "runtime/interconnect.h"

#include <algorithm>
#include <set>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace shardscope::runtime {

namespace {
// The largest pod a spec may name (16x16x16 is 4096); real runs are checked
// against the mesh by whoever runs them.
constexpr int64_t kMaxChips = 65536;
constexpr int64_t kMaxDim = 4096;
// The most links a spec may wire. A GPU cluster links every pair of chips in
// a host and every pair of hosts per rail, so its links grow with the square:
// gpu:4096x16 would be 134M links, 9 GB and a minute of building before any
// check could refuse it. gpu:1024x8 (4.2M links) is within.
constexpr int64_t kMaxLinks = int64_t{1} << 23;
constexpr int kTpuChipsPerHost = 4;  // a TPU v4 host drives 4 chips

absl::Status Bad(const std::string& spec, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--topology '", spec, "': ", why,
      " (forms: a torus AxB or AxBxC, e.g. 2x4, 4x4x4; or gpu:NxM, N hosts of M chips, e.g. gpu:2x4)"));
}
}  // namespace

std::string Link::id() const { return absl::StrCat(a, "-", b); }

absl::StatusOr<Interconnect> Interconnect::Parse(const std::string& spec) {
  Interconnect ic;
  ic.spec_ = spec;
  std::string body = spec;
  if (body.rfind("gpu:", 0) == 0) {
    ic.gpu_ = true;
    body = body.substr(4);
  }
  std::vector<std::string> parts = absl::StrSplit(body, 'x');
  const std::string upper_x =
      body.find('X') != std::string::npos ? "; dimensions are separated by a lowercase x" : "";
  if (body.empty() || parts.size() > 3 || (ic.gpu_ && parts.size() != 2))
    return Bad(spec, absl::StrCat(ic.gpu_ ? "gpu: takes N hosts x M chips" : "a torus has 1 to 3 dimensions",
                                  upper_x));
  int64_t chips = 1;
  for (size_t k = 0; k < parts.size(); ++k) {
    int64_t d = 0;
    // Digits only: " 4", "+4" or "4\n" would be stored as spelled, and two
    // spellings of one topology would read as two.
    const bool digits = !parts[k].empty() && absl::c_all_of(parts[k], absl::ascii_isdigit);
    if (!digits || !absl::SimpleAtoi(parts[k], &d) || d < 1 || d > kMaxDim) {
      // The usual slips, said plainly: "4X4", "GPU:2x4", "4 x 4".
      std::string hint = upper_x;
      if (hint.empty() && !parts[k].empty() && !digits) hint = "; digits only (no spaces or signs)";
      if (k == 0 && !ic.gpu_ && absl::AsciiStrToLower(spec).rfind("gpu:", 0) == 0)
        hint = "; write gpu: in lowercase";
      return Bad(spec, absl::StrCat(ic.gpu_ ? (k == 0 ? "hosts" : "chips per host")
                                            : absl::StrCat("dimension ", k + 1),
                                    " is '", parts[k], "', not a whole number from 1 to ", kMaxDim, hint));
    }
    chips *= d;
    if (chips > kMaxChips) return Bad(spec, absl::StrCat("more than ", kMaxChips, " chips"));
    ic.dims_.push_back(d);
  }
  // One spelling per topology ("004x4" is 4x4), so stored runs compare as equal.
  ic.spec_ = absl::StrCat(ic.gpu_ ? "gpu:" : "", absl::StrJoin(ic.dims_, "x"));
  // Counted before any is made (see kMaxLinks).
  int64_t links = 0;
  if (ic.gpu_) {
    const int64_t hosts = ic.dims_[0], per = ic.dims_[1];
    links = hosts * (per * (per - 1) / 2) + per * (hosts * (hosts - 1) / 2);
  } else {
    for (int64_t d : ic.dims_)
      if (d >= 2) links += d == 2 ? chips / 2 : chips;  // a dimension of 2: one link per pair
  }
  if (links > kMaxLinks)
    return Bad(spec,
               absl::StrCat("it has ", links, " links, more than the ", kMaxLinks, " this tool wires",
                            ic.gpu_ ? " (a GPU cluster links every pair of chips in a host and every pair "
                                      "of hosts per rail: fewer hosts or chips per host)"
                                    : ""));
  const int n = static_cast<int>(chips);
  ic.coords_.resize(n);
  for (int c = 0; c < n; ++c) {
    std::vector<int64_t> x(ic.dims_.size());
    for (int64_t k = static_cast<int64_t>(ic.dims_.size()) - 1, rest = c; k >= 0; --k) {
      x[k] = rest % ic.dims_[k];
      rest /= ic.dims_[k];
    }
    ic.coords_[c] = std::move(x);
  }
  auto add = [&](int a, int b, bool dcn) {
    if (a == b) return;
    if (a > b) std::swap(a, b);
    const int64_t key = int64_t{a} * n + b;
    if (ic.link_of_.count(key)) return;
    ic.link_of_[key] = static_cast<int>(ic.links_.size());
    ic.links_.push_back({a, b, dcn});
  };
  if (ic.gpu_) {
    const int hosts = static_cast<int>(ic.dims_[0]), per = static_cast<int>(ic.dims_[1]);
    ic.hosts_ = hosts;
    for (int h = 0; h < hosts; ++h)
      for (int i = 0; i < per; ++i)
        for (int j = i + 1; j < per; ++j) add(h * per + i, h * per + j, false);
    for (int i = 0; i < per; ++i)
      for (int h = 0; h < hosts; ++h)
        for (int g = h + 1; g < hosts; ++g) add(h * per + i, g * per + i, true);
  } else {
    ic.hosts_ = n % kTpuChipsPerHost == 0 ? n / kTpuChipsPerHost : 1;
    for (int c = 0; c < n; ++c) {
      for (size_t k = 0; k < ic.dims_.size(); ++k) {
        if (ic.dims_[k] < 2) continue;
        std::vector<int64_t> x = ic.coords_[c];
        x[k] = (x[k] + 1) % ic.dims_[k];  // wraparound
        int other = 0;
        for (size_t j = 0; j < x.size(); ++j)
          other = other * static_cast<int>(ic.dims_[j]) + static_cast<int>(x[j]);
        add(c, other, false);
      }
    }
  }
  return ic;
}

std::string Interconnect::CoordsText(int chip) const {
  return absl::StrCat("[", absl::StrJoin(coords_[chip], ","), "]");
}

int Interconnect::FindLink(int a, int b) const {
  const int n = num_chips();
  if (a < 0 || b < 0 || a >= n || b >= n || a == b) return -1;
  if (a > b) std::swap(a, b);
  auto it = link_of_.find(int64_t{a} * n + b);
  return it == link_of_.end() ? -1 : it->second;
}

std::vector<int> Interconnect::Route(int from, int to) const {
  std::vector<int> route;
  if (from == to) return route;
  if (gpu_) {
    // Over the rail to the target's host (same position), then NVLink inside it.
    const int per = chips_per_host();
    int at = from;
    if (host_of(from) != host_of(to)) {
      const int via = host_of(to) * per + from % per;
      route.push_back(FindLink(at, via));
      at = via;
    }
    if (at != to) route.push_back(FindLink(at, to));
    return route;
  }
  // Dimension order, the shorter way round each ring (ties: upwards).
  std::vector<int64_t> x = coords_[from];
  const std::vector<int64_t>& dst = coords_[to];
  auto id = [&](const std::vector<int64_t>& c) {
    int v = 0;
    for (size_t j = 0; j < c.size(); ++j) v = v * static_cast<int>(dims_[j]) + static_cast<int>(c[j]);
    return v;
  };
  for (size_t k = 0; k < dims_.size(); ++k) {
    const int64_t size = dims_[k];
    const int64_t up = ((dst[k] - x[k]) % size + size) % size;
    const int64_t step = up <= size - up ? 1 : -1;
    while (x[k] != dst[k]) {
      const int here = id(x);
      x[k] = ((x[k] + step) % size + size) % size;
      route.push_back(FindLink(here, id(x)));
    }
  }
  return route;
}

std::string Interconnect::Describe() const {
  int dcn = 0;
  for (const Link& l : links_) dcn += l.dcn;
  const std::string shape = absl::StrJoin(dims_, "x");
  return absl::StrCat(gpu_ ? absl::StrCat("gpu cluster ", shape) : absl::StrCat(shape, " torus"), " (",
                      hosts_, hosts_ == 1 ? " host x " : " hosts x ", chips_per_host(),
                      chips_per_host() == 1 ? " chip, " : " chips, ", links_.size(), " links",
                      dcn ? absl::StrCat(", ", dcn, " of them between hosts") : "", ")");
}

}  // namespace shardscope::runtime
