# Topology, planner and emitters (issue 2): the demo's first part and the plan benchmark.
.PHONY: demo-topology bench-plan

BETZY := synthetic:pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)

demo-topology:
	@echo "== this machine (live topology; PU lists are OS indexes)"
	$(TOPOBIND) show
	@echo "== every-other-core on this machine"
	$(TOPOBIND) plan --layout every-other-core
	@echo "== per-l3 on this machine"
	$(TOPOBIND) plan --layout per-l3
	@echo "== betzy-epyc7742 (2x AMD EPYC 7742, NPS4): topology"
	$(TOPOBIND) show --topology '$(BETZY)'
	@echo "== betzy-epyc7742: every-other-core, 64 ranks (first 8 rows)"
	$(TOPOBIND) plan --topology '$(BETZY)' --layout every-other-core | head -12
	$(TOPOBIND) plan --topology '$(BETZY)' --layout every-other-core --format srun | cut -c1-160
	@echo "== betzy-epyc7742: per-l3 (one rank per L3 domain, 4 threads each)"
	$(TOPOBIND) plan --topology '$(BETZY)' --layout per-l3 | tail -8

bench-plan:
	$(PY) scripts/bench-plan.py

DEMO_STEPS := demo-topology $(DEMO_STEPS)
BENCH_TARGETS += bench-plan
