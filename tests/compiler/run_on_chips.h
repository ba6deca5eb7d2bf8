// Running a global program on n virtual chips, for the compiler tests that
// compare partitioned runs with one chip (spmd_test.cc, while_test.cc).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "compiler/ir.h"
#include "gtest/gtest.h"
#include "runtime/client.h"

namespace shardscope {

// One client per chip count, kept for the test binary's life.
inline runtime::Client& ClientFor(int n) {
  static std::map<int, std::unique_ptr<runtime::Client>> clients;
  auto& c = clients[n];
  if (!c) {
    runtime::TopologyOptions o;
    o.num_hosts = 1;
    o.chips_per_host = n;
    auto made = runtime::Client::Create(o);
    EXPECT_TRUE(made.ok()) << made.status();
    c = std::move(*made);
    c->set_poison_padding(true);  // NaN in padded shards: a program that lets padding into data fails
  }
  return *c;
}

// Runs `m` on `client` with the given shardings and inputs; returns host outputs.
inline absl::StatusOr<std::vector<Literal>> RunProgram(runtime::Client& client, const compiler::Module& m,
                                         const std::vector<Sharding>& shardings,
                                         const std::vector<Literal>& inputs,
                                         std::shared_ptr<const runtime::Executable>* exe_out = nullptr) {
  auto compiled = client.Compile(m);
  if (!compiled.ok()) return compiled.status();
  if (exe_out) *exe_out = compiled->executable;
  std::vector<runtime::DeviceArray> args;
  for (size_t k = 0; k < inputs.size(); ++k) {
    auto a = client.TransferToDevices(inputs[k], shardings[k], absl::StrCat("p", k));
    if (!a.ok()) return a.status();
    args.push_back(std::move(*a));
  }
  std::vector<const runtime::DeviceArray*> ptrs;
  for (const auto& a : args) ptrs.push_back(&a);
  auto outs = client.Execute(*compiled->executable, ptrs, {});
  if (!outs.ok()) return outs.status();
  std::vector<Literal> host;
  for (const auto& o : *outs) {
    auto h = client.TransferToHost(o);
    if (!h.ok()) return h.status();
    host.push_back(std::move(*h));
  }
  return host;
}

}  // namespace shardscope
