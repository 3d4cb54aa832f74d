# Flux (flux-core 0.88.0) built from the offline mirror's source archive
# ($(SHARED)/flux/flux-core-0.88.0.tar.gz) into build/flux/ by scripts/build-flux.sh:
#   make flux   the Debian packages of scripts/flux-apt-packages.txt (root), then flux-core,
#               installed once into a cache outside the clone keyed by the archive's sha256
#               ($$TOPOBIND_CACHE, default /var/cache/topobind when writable, else
#               ~/.cache/topobind: flux-0.88.0-<key>/), build/flux a link to it. Unchanged
#               archive and configure line: a link, no build (CI's fresh clones).
#               Without the archive: one line naming where to get it; the Flux tests skip.
# Use it from a shell: scripts/flux-start --test-size=1 ... (build/flux/bin/flux start with
#             this clone's plugin folder as the job shell's: -Sconf.shell_pluginpath).
#             The Flux shell plugin rankstep/bin/topobind_flux.so (rankstep/Makefile
#             flux-plugin) is installed as build/flux-plugins/topobind.so, in this clone: never
#             into the shared Flux prefix build/flux links to (two clones would replace each
#             other's plugin there, and every instance of that Flux would load it).
.PHONY: flux flux-clean flux-plugin
FLUX_PLUGINS := build/flux-plugins
flux:
	@bash scripts/build-flux.sh
	@if [ -x build/flux/bin/flux ]; then $(MAKE) --no-print-directory flux-plugin; fi

flux-plugin:
	@test -f build/flux/include/flux/shell.h || { echo "flux-plugin: error: no Flux headers in build/flux/include; run 'make flux' (it builds Flux, then this plugin)" >&2; exit 2; }
	$(MAKE) -C rankstep flux-plugin FLUX_INCLUDE=$(CURDIR)/build/flux/include
	install -D -m 0755 rankstep/bin/topobind_flux.so $(FLUX_PLUGINS)/topobind.so

# Removes this clone's link and plugin only; the cache stays (rm -rf the folder it names to
# rebuild).
flux-clean:
	rm -f build/flux
	rm -rf $(FLUX_PLUGINS)

TEST_PREREQS += flux

# The Flux shell plugin's cost a task (its own clock) and a job's wall time with and without
# it: results/bench/flux.json (target: at most 1 ms a task).
.PHONY: bench-flux
bench-flux: kernels flux
	$(PY) scripts/bench-flux.py

BENCH_TARGETS += bench-flux
