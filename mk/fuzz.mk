# Property-based tests (Hypothesis) of every parser of outside input: tests/test_fuzz_*.py.
# 'make test' runs them derandomized with a small fixed budget; 'make fuzz' runs random
# examples, 50 times as many (TOPOBIND_FUZZ=long, see tests/fuzzing.py). A failure prints the
# example and a @reproduce_failure line to paste above the test.
.PHONY: fuzz
fuzz: setup kernels spank-option
	TOPOBIND_FUZZ=long $(PY) -m pytest -q -ra -p no:cacheprovider tests/cli/test_fuzz_inputs.py tests/cli/test_fuzz_commands.py \
	  tests/launch/test_fuzz_step.py
