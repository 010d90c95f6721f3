"""PyTorch's kernels reached past the dispatcher: the rules over a built extension's imports
(kbv.checks.native) and the reader of those imports (kbv.processes.elf)."""

from __future__ import annotations

import shutil

import pytest

from kbv.checks.native import aten_kernel_imports, native_covered, torch_registrations
from kbv.processes.elf import ElfError, elf_files, reader, symbols

OPS = ["aten::mm", "aten::addmm", "aten::addmm.out", "aten::relu", "aten::relu_", "aten::_softmax", "aten::softmax.int",
       "aten::clamp_min", "aten::copy_", "aten::empty.memory_format", "aten::gelu", "aten::sum.dim_IntList",
       "prims::mul"]


def test_kernels_of_every_route_name_their_op():
    syms = [
        "at::cpu::mm(at::Tensor const&, at::Tensor const&)",
        "at::cuda::addmm_out(at::Tensor&, at::Tensor const&, at::Tensor const&, at::Tensor const&, "
        "c10::Scalar const&, c10::Scalar const&)",
        "at::native::relu(at::Tensor const&)",
        "at::_ops::clamp_min::redispatch(c10::DispatchKeySet, at::Tensor const&, c10::Scalar const&)",
        "at::compositeexplicitautograd::gelu_outf(at::Tensor const&, c10::basic_string_view<char>, at::Tensor&)",
        "at::native::structured_softmax_cpu_out::impl(at::Tensor const&, long, bool, at::Tensor const&)",
        "void at::native::cpublas::gemm<float>(char, char, long, long, long, float, float const*, long)",
        "at::native::sum_stub",
    ]
    assert aten_kernel_imports(syms, OPS) == {
        "aten.addmm": [syms[1]], "aten.clamp_min": [syms[3]], "aten.gelu": [syms[4]],
        "aten.mm": [syms[0], syms[6]], "aten.relu": [syms[2]], "aten.softmax": [syms[5]], "aten.sum": [syms[7]]}


def test_dispatched_calls_helpers_and_ops_without_math_are_not_kernels():
    syms = [
        "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)",  # through the dispatcher: counted there
        "at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, ...)",
        "at::cuda::getCurrentCUDAStream(signed char)", "at::cuda::warp_size()",
        "at::native::empty_cpu(c10::ArrayRef<long>, ...)", "at::native::copy_(at::Tensor&, at::Tensor const&, bool)",
        "at::native::resize_output(at::Tensor const&, c10::ArrayRef<long>)",
        "at::TensorBase::data_ptr<float>() const", "float* at::TensorBase::mutable_data_ptr<float>() const",
        "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)",
        "at::mm(at::Tensor const&, at::Tensor const&)", "cblas_sgemm", "", 7,
    ]
    assert aten_kernel_imports(syms, OPS) == {}


def test_a_reference_reached_through_an_imported_kernel_is_covered():
    ref = {"aten.mm": 1}
    assert native_covered(ref, {}, {"aten.mm": ["at::cpu::mm(...)"]}) == ["aten.mm"]
    # a family: linear's addmm is reached by an imported mm kernel
    assert native_covered({"aten.addmm": 2, "aten.t": 1}, {}, {"aten.mm": []}) == ["aten.addmm"]
    # imported for one op, dispatched for the other
    assert native_covered({"aten.addmm": 1, "aten.relu": 1}, {"aten.relu": 1}, {"aten.addmm": []}) == [
        "aten.addmm", "aten.relu"]


def test_partial_or_unrelated_imports_cover_nothing():
    assert native_covered({"aten.addmm": 1, "aten.relu": 1}, {}, {"aten.addmm": []}) is None
    assert native_covered({"aten.relu": 1}, {}, {"aten.clamp_min": []}) is None  # another op: a reformulation
    # covered by the dispatched ops alone: the op counts' own rule decides, not this one
    assert native_covered({"aten.relu": 1}, {"aten.relu": 1}, {"aten.mm": []}) is None
    assert native_covered({}, {}, {"aten.mm": []}) is None
    assert native_covered({"aten.mm": 1}, {}, {}) is None
    assert native_covered("bad", {}, {"aten.mm": []}) is None


def test_registrations_for_torchs_namespaces_are_named_and_ones_own_are_not():
    defined = ["TORCH_LIBRARY_IMPL_static_init_aten_CPU_1", "TORCH_LIBRARY_IMPL_init_aten_CPU_1(torch::Library&)",
               "TORCH_LIBRARY_IMPL_static_init___ADInplaceOrView_2", "TORCH_LIBRARY_FRAGMENT_static_init_aten_3",
               "TORCH_LIBRARY_static_init_prims",
               # a namespace of the candidate's own, even one that starts like torch's
               "TORCH_LIBRARY_static_init_mylib", "TORCH_LIBRARY_IMPL_static_init_mylib_CPU_1",
               "TORCH_LIBRARY_IMPL_static_init_aten_extra_CPU_1", "TORCH_LIBRARY_FRAGMENT_static_init_aten_extra_1",
               "relu_rows(at::Tensor)", 3]
    assert torch_registrations(defined) == [
        "TORCH_LIBRARY_FRAGMENT_static_init_aten_3", "TORCH_LIBRARY_IMPL_init_aten_CPU_1(torch::Library&)",
        "TORCH_LIBRARY_IMPL_static_init___ADInplaceOrView_2", "TORCH_LIBRARY_IMPL_static_init_aten_CPU_1",
        "TORCH_LIBRARY_static_init_prims"]


def _elf(path, undefined: list[str], shared: bool = True) -> None:
    """A tiny shared object (or object file) importing ``undefined`` (C names), built with the
    system compiler."""
    import subprocess

    src = path.with_suffix(".c")
    src.write_text("".join(f"extern void {n}(void);\n" for n in undefined)
                   + "void entry(void) {" + "".join(f" {n}();" for n in undefined) + " }\n")
    flags = ["-shared", "-fPIC"] if shared else ["-c"]
    subprocess.run(["cc", *flags, "-o", str(path), str(src)], check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("cc") is None or reader() is None, reason="needs cc and binutils")
def test_the_reader_lists_the_imports_of_every_native_object_it_finds(tmp_path):
    """Shared objects and object files whatever their names; not links, not files of another
    machine (a CUDA cubin is ELF too), not other files."""
    (tmp_path / "ext" / "sub").mkdir(parents=True)
    so = tmp_path / "ext" / "sub" / "kbv_mine.so"
    _elf(so, ["kbv_imported_kernel", "other_symbol"])
    obj = tmp_path / "ext" / "renamed.bin"
    _elf(obj, ["kbv_object_import"], shared=False)
    (tmp_path / "ext" / "fake.so").write_bytes(b"not an ELF file")
    foreign = bytearray(so.read_bytes()[:64])
    foreign[18:20] = (190).to_bytes(2, "little")  # EM_CUDA
    (tmp_path / "ext" / "kernel.cubin").write_bytes(bytes(foreign))
    (tmp_path / "ext" / "link.so").symlink_to(so)
    assert elf_files([tmp_path / "ext", tmp_path / "missing"]) == [obj, so]
    nm = reader()
    imports, defined = symbols(so, nm)
    assert {"kbv_imported_kernel", "other_symbol"} <= set(imports) and "entry" in defined
    assert "kbv_object_import" in symbols(obj, nm)[0]
    if shutil.which("strip"):  # a stripped shared object: its dynamic table
        import subprocess

        subprocess.run(["strip", str(so)], check=True)
        assert "kbv_imported_kernel" in symbols(so, nm)[0]
    broken = tmp_path / "broken.so"
    broken.write_bytes(so.read_bytes()[:64])  # a host ELF header and nothing else
    with pytest.raises(ElfError, match="broken.so"):
        symbols(broken, nm)


def test_a_symbol_longer_than_any_pytorch_kernels_is_not_matched():
    """A red-team object's 500,000-character symbol made the kernel pattern backtrack for a minute
    in the reference worker: symbols over MAX_SYMBOL_CHARS are skipped (none of libtorch's is)."""
    from kbv.checks.native import MAX_SYMBOL_CHARS, aten_kernel_imports

    ops = ["aten::mm"]
    real = "at::cpu::mm(at::Tensor const&, at::Tensor const&)"
    assert aten_kernel_imports([real], ops) == {"aten.mm": [real]}
    padded = real.replace("at::Tensor const&, ", "at::Tensor const&, " + " " * MAX_SYMBOL_CHARS, 1)
    assert aten_kernel_imports([padded, "&at::a::b<" * 50000 + "z"], ops) == {}
