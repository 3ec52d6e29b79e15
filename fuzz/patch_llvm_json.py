"""Writes a copy of LLVM 14's llvm/Support/JSON.h that clang 14 accepts with
libstdc++ 12 in C++20 mode (the fuzz build): the non-template members of
json::Array, defined in the class while json::Value is still incomplete, are
moved after json::Value (clang instantiates libstdc++'s constexpr
std::vector<Value> members at their definition). GCC needs no copy.
    python3 patch_llvm_json.py /usr/lib/llvm-14/include OUT_INCLUDE_DIR
"""
import os
import re
import sys

src, out = sys.argv[1], sys.argv[2]
text = open(os.path.join(src, "llvm/Support/JSON.h")).read()
start = text.index("class Array {")
end = text.index("\n};\n", start)
body = text[start:end]
# One line per member, so that the pattern below sees each whole.
body = body.replace("iterator insert(iterator P, Value &&E) {\n    return V.insert(P, std::move(E));\n  }",
                    "iterator insert(iterator P, Value &&E) { return V.insert(P, std::move(E)); }")
body = body.replace("  friend bool operator==(const Array &L, const Array &R) { return L.V == R.V; }",
                    "  friend bool operator==(const Array &L, const Array &R);")
moved = ["inline bool operator==(const Array &L, const Array &R) { return L.V == R.V; }"]
pattern = re.compile(r"^  ((?!template)[^\n{}]*?\b(\w+|operator\[\])\(([^()]*)\)( const)?) \{ (.*?) \}$",
                     re.M)


def replace(m):
    signature, name, params, const, stmt = m.groups()
    if name in ("Array",):
        return m.group(0)
    # "Value &operator[](size_t I)" -> "Value &Array::operator[](size_t I)"
    head = signature[: signature.rindex(name)]
    head = re.sub(r"^(const_iterator|iterator) ", r"Array::\1 ", head)
    moved.append("inline %sArray::%s(%s)%s { %s }" % (head, name, params, const or "", stmt))
    return "  %s;" % signature


body = pattern.sub(replace, body)
text = text[:start] + body + text[end:]
anchor = "inline bool operator!=(const Value &L, const Value &R) { return !(L == R); }"
text = text.replace(anchor, anchor + "\n\n" + "\n".join(moved), 1)
dest = os.path.join(out, "llvm/Support")
os.makedirs(dest, exist_ok=True)
open(os.path.join(dest, "JSON.h"), "w").write(text)
print("moved %d members of json::Array" % len(moved))
