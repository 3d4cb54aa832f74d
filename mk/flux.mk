# Flux (flux-core 0.88.0) built from the offline mirror's source archive
# ($(SHARED)/flux/flux-core-0.88.0.tar.gz) into build/flux/ by scripts/build-flux.sh:
#   make flux   the Debian packages of scripts/flux-apt-packages.txt (root), then flux-core,
#               installed once into a cache outside the clone keyed by the archive's sha256
#               ($$TOPOBIND_CACHE, default /var/cache/topobind when writable, else
#               ~/.cache/topobind: flux-0.88.0-<key>/), build/flux a link to it. Unchanged
#               archive and configure line: a link, no build (CI's fresh clones).
#               Without the archive: one line naming where to get it; the Flux tests skip.
# Use it from a shell: build/flux/bin/flux start --test-size=1 ...
.PHONY: flux flux-clean
flux:
	@bash scripts/build-flux.sh

# Removes this clone's link only; the cache stays (rm -rf the folder it names to rebuild).
flux-clean:
	rm -f build/flux

TEST_PREREQS += flux
