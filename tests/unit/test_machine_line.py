"""benchmarks/machine.py names the processor down to what changes our figures: its model
and whether it has AVX-512 and native bfloat16 (the presets' ``fast`` precision)."""

from __future__ import annotations

from benchmarks.machine import cpu_description, machine_line

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu vme sse sse2 fma avx avx2 bmi2

processor\t: 1
model name\t: another line the first processor already said
"""

ZEN4 = ZEN3.replace("model\t\t: 1", "model\t\t: 17").replace(
    "avx2 bmi2", "avx2 bmi2 avx512f avx512dq avx512_bf16 avx512_vnni")


def test_a_zen3_and_a_zen4_host_read_apart():
    assert cpu_description(ZEN3) == "AMD EPYC (family 25 model 1; avx2)"
    assert cpu_description(ZEN4) == "AMD EPYC (family 25 model 17; avx2, avx512f, avx512_bf16)"


def test_a_processor_without_the_fields_still_gets_a_name():
    assert cpu_description("processor\t: 0\nflags\t\t: sse2\n").endswith("(no AVX2)")


def test_the_line_names_this_machine_and_its_bfloat16():
    line = machine_line()
    assert line.startswith("machine: ") and " cores, load average " in line
    assert line.endswith(("bfloat16 native", "no native bfloat16"))
