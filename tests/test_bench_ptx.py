"""PTX quality measurement of bench/ptx.py: the access-width parser on known PTX lines, ptxas -v parsing on a
generated kernel, and failures shown in the table."""

from __future__ import annotations

import pytest

from bench import kernels as bk
from bench.ptx import Row, global_accesses, gpu_name_of, measure, ptxas_info, table

SAMPLE = """
.version 8.7
.target sm_90a
\tld.param.b64 \t%rd7, [vector_add_param_0];
\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
\tld.global.nc.L1::evict_last.v2.b32 { %r5, %r6 }, [ %rd2 + 0 ];
\t@!%p2 ld.global.b32 %r7, [ %rd3 + 0 ];
\tld.global.v2.b64 { %rd8, %rd9 }, [ %rd4 + 0 ];
\tld.global.b16 %rs1, [ %rd5 + 0 ];
\tld.shared.v4.b32 { %r1, %r2, %r3, %r4 }, [ %r9 + 0 ];
\t@%p3 st.global.v4.f32 [ %rd6 + 0 ], { %f1, %f2, %f3, %f4 };
\tst.global.b8 [ %rd6 + 0 ], %rs2;
\t@%p4 atom.global.gpu.acq_rel.add.u32 %r10, [ %rd7 + 0 ], %r11;
\tred.global.gpu.add.f32 [ %rd7 + 0 ], %f5;
"""


def test_access_widths_are_vector_length_times_element_bits():
    a = global_accesses(SAMPLE)
    assert (a.count("ld", 128), a.count("ld", 64), a.count("ld", 32), a.narrow("ld")) == (2, 1, 1, 1)
    assert (a.count("st", 128), a.count("st", 64), a.count("st", 32), a.narrow("st")) == (1, 0, 0, 1)
    assert a.atomics == 2


def test_target_is_read_from_the_ptx():
    assert gpu_name_of(SAMPLE) == "sm_90a"
    assert gpu_name_of("// no target") == "sm_90a"


def test_ptxas_rejects_broken_ptx_with_its_message():
    with pytest.raises(RuntimeError, match=r"^ptxas failed: "):
        ptxas_info(".version 8.0\n.target sm_90a\n.address_size 64\nthis is not ptx\n")


def test_generated_vector_add_has_128_bit_loads_and_no_spills():
    row = measure(bk.vector_add_case(4096))
    assert row.error is None
    assert row.target == "sm_90a"
    assert row.accesses is not None and row.info is not None
    assert row.accesses.count("ld", 128) >= 2  # x and y
    assert row.accesses.count("st", 128) >= 1
    assert row.info.registers > 0
    assert (row.info.spill_stores, row.info.spill_loads) == (0, 0)
    assert row.vector_ok is True and row.spill_ok is True and row.met is True
    assert "| vector_add | 4k " in table([row])


def test_a_failing_kernel_is_a_table_row():
    row = Row(bk.vector_add_case(16), error="IntentError: Triton could not compile")
    text = table([row])
    assert "FAILED: IntentError: Triton could not compile" in text
    assert row.met is False
