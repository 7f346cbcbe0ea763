"""Regenerate docs/transformers_common_tests.md from a `pytest -rA` run of tests/test_transformers_common.py.

    .venv/bin/python docs/record_transformers_common_tests.py
"""

import collections
import re
import subprocess
import sys

import transformers

TEST_FILE = "tests/test_transformers_common.py"


def main():
    run = subprocess.run([sys.executable, "-m", "pytest", TEST_FILE, "-rA", "-q", "-p", "no:cacheprovider"],
                         capture_output=True, text=True)
    passed = collections.defaultdict(set)
    skipped_by_us, skipped_by_mixin = collections.Counter(), collections.Counter()
    failed = set()
    for line in run.stdout.splitlines():
        test = re.match(rf"PASSED {TEST_FILE}::(\w+)::(\w+)", line)
        failure = re.match(rf"(?:SUB)?FAILED(?:\[[^\]]*\])? {TEST_FILE}::(\w+)::(\w+)", line)
        skip = re.match(r"SKIPPED \[(\d+)\] [^:]+:\d+: (.*)", line)
        if test:
            passed[test.group(1)].add(test.group(2))
        elif skip:
            counter = skipped_by_us if TEST_FILE in line else skipped_by_mixin
            counter[skip.group(2)] += int(skip.group(1))
        elif failure:  # a test whose subtest failed is reported both ways: it failed
            failed.add(failure.groups())
    for test_class, name in failed:
        passed[test_class].discard(name)
    if run.returncode not in (0, 5) and not failed:
        raise SystemExit(f"pytest exited with {run.returncode} and no failure was parsed:\n{run.stdout[-3000:]}")
    lines = ["# Transformers' common model tests against hf_longdoc families", "",
             f"Produced by `docs/record_transformers_common_tests.py` (`pytest -rA {TEST_FILE}`) with transformers "
             f"{transformers.__version__} (`ModelTesterMixin` and `ConfigTester` from its source distribution). "
             f"{len(failed)} failed.", ""]
    for test_class, names in passed.items():
        lines += [f"## {test_class}: {len(names)} passed", "", ", ".join(f"`{name}`" for name in sorted(names)), ""]
    lines += ["## Skipped", "", "By hf_longdoc (`mixin_skips` in tests/families.py), with the reason:", ""]
    lines += [f"- {reason}" for reason in skipped_by_us]
    lines += ["", "By the mixin itself (reason as it gives it, across all families):", ""]
    lines += [f"- {reason} ({count})" for reason, count in skipped_by_mixin.most_common()]
    with open("docs/transformers_common_tests.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(failed)} failed;", {test_class: len(names) for test_class, names in passed.items()})


if __name__ == "__main__":
    main()
