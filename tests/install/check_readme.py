"""Checks that each code snippet of README's "Use remat in your pipeline"
section is an excerpt of the program a test builds or runs: cpp of
tests/install/cpp/main.cpp, c of tests/install/c/main.c, python of
python/tests/test_remat.py (lines compared without their indentation).

    python3 tests/install/check_readme.py ROOT
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
sources = {
    "cpp": root / "tests/install/cpp/main.cpp",
    "c": root / "tests/install/c/main.c",
    "python": root / "python/tests/test_remat.py",
}
readme = (root / "README.md").read_text()
section = readme.split("## Use remat in your pipeline\n", 1)
if len(section) != 2:
    sys.exit("README.md: no section 'Use remat in your pipeline'")
section = section[1].split("\n## ", 1)[0]


def lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


checked = {}
for language, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
    if language not in sources:
        continue
    snippet, source = lines(body), lines(sources[language].read_text())
    found = any(source[i:i + len(snippet)] == snippet
                for i in range(len(source) - len(snippet) + 1))
    if not found:
        sys.exit(f"README.md: the {language} snippet is not an excerpt of "
                 f"{sources[language].relative_to(root)}")
    checked[language] = True
missing = sorted(set(sources) - set(checked))
if missing:
    sys.exit("README.md: no snippet for " + ", ".join(missing))
print("README snippets: " + ", ".join(sorted(checked)) + " match their tests")
