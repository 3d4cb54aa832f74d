"""The spec parser (Spack's grammar) and version matching, on tricky specs."""

from __future__ import annotations

import pytest

from topobind.spackcheck.specs import SpecSyntaxError, parse_spec
from topobind.spackcheck.versions import satisfies


def _variants(text: str, node: int = 0) -> dict[str, str]:
    return {v.name: v.value for v in parse_spec(text).nodes[node].variants}


def test_name_versions_variants_dependencies() -> None:
    spec = parse_spec("openmpi@4.1:5.0 schedulers=slurm,tm ~java ^hwloc@2.9.0 +libxml2 %gcc@12")
    root, hwloc, gcc = spec.nodes
    assert (root.name, root.version) == ("openmpi", "4.1:5.0")
    assert _variants(spec.text) == {"schedulers": "slurm,tm", "java": "false"}
    assert (hwloc.edge, hwloc.name, hwloc.version) == ("^", "hwloc", "2.9.0")
    assert [v.name for v in hwloc.variants] == ["libxml2"]  # +libxml2 belongs to ^hwloc
    assert (gcc.edge, gcc.name, gcc.version) == ("%", "gcc", "12")


@pytest.mark.parametrize(
    "text,version",
    [
        ("hwloc@2.9:", "2.9:"),
        ("hwloc@:2.9", ":2.9"),
        ("hwloc@=2.9.0", "=2.9.0"),
        ("hwloc@2.8,2.9.1:2.10", "2.8,2.9.1:2.10"),
        ("hwloc@ 2.8 , 2.9", "2.8,2.9"),  # Spack allows spaces after '@' and around ','
        ("hwloc@git.v2.9=2.9", "git.v2.9=2.9"),
        ("slurm@22-05-8-1", "22-05-8-1"),
    ],
)
def test_versions(text: str, version: str) -> None:
    assert parse_spec(text).root.version == version


def test_minus_is_a_variant_only_after_a_space() -> None:
    assert _variants("openblas -fortran") == {"fortran": "false"}
    spec = parse_spec("py-matplotlib")  # '-' inside a name is the name
    assert spec.root.name == "py-matplotlib" and not spec.root.variants


def test_propagated_and_quoted_values() -> None:
    spec = parse_spec("hpl ++openmp ~~shared threads==openmp cflags='-O3 -g' target=zen4")
    got = {v.name: (v.value, v.propagate, v.boolean) for v in spec.root.variants}
    assert got == {
        "openmp": ("true", True, True),
        "shared": ("false", True, True),
        "threads": ("openmp", True, False),
        "cflags": ("-O3 -g", False, False),
        "target": ("zen4", False, False),
    }


def test_virtual_assignments_and_edge_attributes() -> None:
    a = parse_spec("hpl ^mpi=openmpi@4.1 +legacylaunchers").nodes[1]
    assert (a.name, a.version, a.virtuals, a.column) == ("openmpi", "4.1", ("mpi",), 10)
    assert [v.name for v in a.variants] == ["legacylaunchers"]
    b = parse_spec("hpl ^[virtuals=blas,lapack deptypes=link] openblas").nodes[1]
    assert (b.name, b.virtuals) == ("openblas", ("blas", "lapack"))
    c = parse_spec("hpl %c,cxx=gcc@13").nodes[1]
    assert (c.edge, c.name, c.virtuals) == ("%", "gcc", ("c", "cxx"))


def test_namespaces_anonymous_and_columns() -> None:
    spec = parse_spec("builtin.hwloc@2.9 +libxml2")
    assert (spec.root.namespace, spec.root.name) == ("builtin", "hwloc")
    anon = parse_spec("@2.9: +libxml2")
    assert anon.root.name is None and anon.root.version == "2.9:"
    # the column of a variant is that of its name (after the sigil)
    assert parse_spec("openmpi +slurrm").root.variants[0].column == 10


@pytest.mark.parametrize(
    "text,column,words",
    [
        ("openmpi @", 9, "must be followed by a version"),
        ("hwloc ^", 7, "must be followed by a package name"),
        ("hwloc openmpi", 7, "a second package name"),
        ("hwloc $HOME", 7, "unexpected character '$'"),
        ("hwloc@2.9@3", 10, "two versions"),
        ("openmpi schedulers= slurm", 19, "without spaces"),
        ("hwloc +", 7, "'+' must be followed by a variant name"),
        ("hpl ^[virtuals=mpi openmpi", 20, "need a closing ']'"),
        ("hpl ^[color=red] openmpi", 7, "only virtuals, deptypes, when"),
        ("", 1, "empty spec"),
    ],
)
def test_errors_name_the_column(text: str, column: int, words: str) -> None:
    with pytest.raises(SpecSyntaxError) as exc:
        parse_spec(text)
    assert exc.value.column == column and words in str(exc.value)


@pytest.mark.parametrize(
    "known,item,ok",
    [
        ("2.9.0", "2.9", True),  # @2.9 is a range: 2.9 and every 2.9.x
        ("2.9.0", "=2.9", False),  # @=2.9 is exactly 2.9
        ("2.10.0", "2.9:", True),  # numeric, not text, order
        ("2.10.0", ":2.9", False),
        ("2.9.3", ":2.9", True),  # the upper bound includes 2.9.x
        ("5.0.10", "4.1:5.0", True),
        ("main", "4.1:", True),  # main/develop/master are newer than every number
        ("22-05-8-1", "22.05:", True),  # '-' and '.' both separate components
        ("0.3.21", "git.v0.3.21=0.3.21", True),
    ],
)
def test_version_matching(known: str, item: str, ok: bool) -> None:
    assert satisfies(known, item) is ok
