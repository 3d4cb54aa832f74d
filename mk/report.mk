# Fleet report (issue 8): `topobind report`, the synthetic fleet generator, the report benchmark.

.PHONY: bench-report report-docs-img

# 1,000 generated hosts x 7 runs x 5 kernels = 35,000 result files (generation not timed);
# times `topobind report` and its peak RSS against the targets (20 s, 1 GiB).
bench-report:
	$(PY) scripts/bench-report.py --hosts 1000 --runs 7 \
	    --kernels stream,dgemm,hpl,latency,c2c -o results/bench/report.json

BENCH_TARGETS += bench-report

# The same at 5,000 generated hosts x 3 runs x 2 kernels (30,000 files; issue 39 item 7): the
# per-host pictures are the host medians' ECDF above charts.MAX_HOST_COLUMNS hosts, their size
# bounded (recorded under "pictures"); same targets. At 3 runs a host, the generator's
# hiccups in 2 of 3 runs make a few more hosts really slow: every planted one must be found.
.PHONY: bench-report-5000
bench-report-5000:
	$(PY) scripts/bench-report.py --hosts 5000 --runs 3 --kernels stream,dgemm \
	    --extra-slow-ok -o results/bench/report-5000.json

BENCH_TARGETS += bench-report-5000

# Regenerate the example pictures shown in docs/report.md (generated data, clearly labelled).
report-docs-img:
	rm -rf build/report-docs && mkdir -p build/report-docs docs/img
	$(PY) tests/fleetgen.py --hosts 40 --runs 7 --kernels stream,dgemm,latency,c2c \
	    --slow gen-node0007:1.12,gen-node0019:1.15:stream,gen-node0031:1.10 \
	    -o build/report-docs/fleet
	$(PY) tests/fleetgen.py --hosts 12 --runs 5 --kernels stream,latency \
	    --pages 4k,2M,1G --seed 2 -o build/report-docs/pages
	$(PY) tests/fleetgen.py --hosts 8 --runs 2 --kernels stream --layout per-l3 \
	    -o build/report-docs/layout
	$(TOPOBIND) report build/report-docs/fleet -o build/report-docs/report
	$(TOPOBIND) report build/report-docs/pages -o build/report-docs/pages-report
	$(TOPOBIND) report build/report-docs/layout -o build/report-docs/layout-report
	cp build/report-docs/report/hosts-stream-nolayout-2MiB.png docs/img/report-hosts-stream.png
	cp build/report-docs/report/ecdf-stream-nolayout-2MiB.png docs/img/report-ecdf-stream.png
	cp build/report-docs/report/matrix-c2c-c2c_latency-nolayout-2MiB.png docs/img/report-c2c.png
	cp build/report-docs/pages-report/pages-latency-nolayout.png docs/img/report-pages-latency.png
	cp build/report-docs/layout-report/layout-per-l3-8x8.png docs/img/report-layout.png
	$(PY) tests/fleetgen.py --hosts 40 --runs 7 --kernels stream --evidence counters \
	    --cause gen-node0007:traffic,gen-node0012:traffic,gen-node0019:throttled \
	    --slow gen-node0007:1.25,gen-node0012:1.2,gen-node0019:1.3 -o build/report-docs/causes
	$(TOPOBIND) report build/report-docs/causes -o build/report-docs/causes-report
	cp build/report-docs/causes-report/scatter-stream-nolayout-2MiB.png \
	    docs/img/report-scatter-stream.png
	cp build/report-docs/causes-report/signal-stream-nolayout-2MiB-l2_lines_in.png \
	    docs/img/report-signal-stream.png
