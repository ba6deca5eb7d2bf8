# The README's two commands. Both set up a fresh Debian machine first.
BUILD ?= build
DB ?= shardscope.db
JOBS ?= $(shell nproc)

.PHONY: deps configure build demo test bench-trace clean

deps:
	@bash cmake/deps.sh

configure: deps
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release; fi

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@unset OPENBLAS_CORETYPE; $(BUILD)/shardscope run mlp --db $(DB) --mesh 2x2 --steps 20
	@$(BUILD)/shardscope report $(DB)
	@echo
	@echo "Open it in the workstation:  $(BUILD)/shardscope-ui $(DB)"

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# What full timeline capture costs (README, "Capture control"): 20 interleaved
# pairs of the 2x2 llama step, --trace kernels against --trace off.
bench-trace: configure
	@cmake --build $(BUILD) -j $(JOBS) --target trace_cost_bench
	@unset OPENBLAS_CORETYPE; $(BUILD)/bench/trace_cost_bench --pairs 20 --steps 6

clean:
	rm -rf $(BUILD)
