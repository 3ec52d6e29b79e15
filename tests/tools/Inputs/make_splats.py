"""Prints a .rir graph with COUNT splat constants of f32[SIZE] added to the
input x in a chain: a few bytes of text per constant, SIZE * 4 bytes each
in memory.

    make_splats.py COUNT SIZE
"""
import sys

count, size = int(sys.argv[1]), int(sys.argv[2])
print(f"graph @splats(%x: f32[{size}]) {{")
for i in range(count):
    print(f"  %c{i} = Constant() {{value = dense<f32[{size}]: 1.0>}} : f32[{size}]")
previous = "%x"
for i in range(count):
    print(f"  %s{i} = Add({previous}, %c{i}) : f32[{size}]")
    previous = f"%s{i}"
print(f"  return {previous}")
print("}")
