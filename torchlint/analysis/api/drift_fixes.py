"""Rewrites of calls to removed or deprecated torch APIs into their replacements (TL601, TL602).

A rewrite is offered only where the replacement computes what the old API computed on every input
the old API accepted; otherwise :func:`rewrite_call` returns None and the rule reports without a
fix.  The cases that need care:

- results: ``torch.solve`` returned ``(solution, LU)``, ``torch.linalg.solve`` returns the
  solution; the rewrite is exact only where the program keeps the first result alone
  (``torch.solve(B, A)[0]``, ``.solution``, ``X, _ = torch.solve(B, A)``), and then replaces that
  whole expression (:func:`field_use`).  The same holds for ``triangular_solve``, ``symeig``
  without eigenvectors and ``svd`` read for its singular values;
- argument order: ``torch.solve(B, A)`` / ``torch.lu_solve(b, LU, pivots)`` put the right-hand
  side first, ``torch.linalg`` puts it last; positional arguments of ``torch.cuda.amp.autocast``
  become keywords of ``torch.amp.autocast("cuda", ...)``, whose first parameter is the device;
- defaults: ``torch.symeig`` read the upper triangle (``UPLO="U"``), ``linalg.eigh`` the lower;
  ``torch.range`` includes its end and returns the default float dtype, ``torch.arange`` excludes
  it and returns int64 for integer arguments (so the rewrite states ``dtype=torch.get_default_dtype()``
  and is exact only when ``end - start`` is a whole number of steps).

A call with ``*args``/``**kwargs`` is never rewritten but by a plain rename.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.api.api_drift import LEGACY_SPARSE_DTYPES, SIX_VALUES
from torchlint.analysis.model.calls import has_star_args, literal_bool
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.values.kinds import value_kind
from torchlint.findings import Applicability, FixSpec, ImportRequirement, Replacement

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

Imports = Tuple[ImportRequirement, ...]


# -- naming the replacement ----------------------------------------------------------------------


def api_reference(context: "FileContext", qualified: str) -> Optional[Tuple[str, Imports]]:
    """Source text naming ``qualified`` (``torch.linalg.solve``) through the file's imports, with the import
    it needs, if any; None when the package's name is taken by something else."""
    existing = context.imports.reference_to(qualified)
    if existing is not None:
        return existing, ()
    package = qualified.split(".", 1)[0]
    if context.imports.is_bound(package) or context.binds_name(package):
        return None  # ``torch`` is bound, yet not to torch (a shadowing definition): leave it to the reader
    return qualified, (ImportRequirement(package),)


def _reference_node(context: "FileContext", qualified: str) -> Optional[Tuple[cst.BaseExpression, Imports]]:
    found = api_reference(context, qualified)
    if found is None:
        return None
    text, imports = found
    return cst.parse_expression(text), imports


def renamed_reference(context: "FileContext", node: cst.BaseExpression, old: str, new: str) -> Optional[Tuple[cst.BaseExpression, Imports]]:
    """``node`` (a reference to ``old``) rewritten to name ``new``: the last attribute is swapped when both live in
    the same module and ``node`` reaches it as an attribute (``F.upsample`` -> ``F.interpolate``), else a
    reference through the imports."""
    old_module, _, _ = old.rpartition(".")
    new_module, _, new_last = new.rpartition(".")
    if old_module == new_module and isinstance(node, cst.Attribute):
        return node.with_changes(attr=cst.Name(new_last)), ()
    return _reference_node(context, new)


# -- reading arguments ------------------------------------------------------------------------------


def bind(call: cst.Call, positional: Sequence[str], keyword_only: Sequence[str] = (), receiver: Optional[cst.BaseExpression] = None) -> Optional[Dict[str, cst.BaseExpression]]:
    """Parameter -> argument value, as Python binds ``call`` to ``(positional..., *, keyword_only...)``
    (``receiver``, for a method call, is the first positional one); None for a call Python would reject,
    a keyword the table does not name, or ``*args``/``**kwargs``."""
    if has_star_args(call):
        return None
    bound: Dict[str, cst.BaseExpression] = {}
    values: List[cst.BaseExpression] = ([receiver] if receiver is not None else []) + [a.value for a in call.args if a.keyword is None]
    if len(values) > len(positional):
        return None
    bound.update(zip(positional, values))
    for arg in call.args:
        if arg.keyword is None:
            continue
        name = arg.keyword.value
        if name in bound or (name not in positional and name not in keyword_only):
            return None
        bound[name] = arg.value
    return bound


def _integer(node: Optional[cst.BaseExpression]) -> Optional[int]:
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return -int(node.expression.value, 0)
    return None


def _is_number(node: Optional[cst.BaseExpression]) -> bool:
    """A numeric literal (``2``, ``-1``, ``0.5``, ``float("inf")``, ``math.inf``): a vector norm's order."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _is_number(node.expression)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "float" and len(node.args) == 1:
        return isinstance(node.args[0].value, cst.SimpleString)
    return dotted_name(node) in ("math.inf", "torch.inf", "np.inf", "numpy.inf") if node is not None else False


# -- building ---------------------------------------------------------------------------------------


def _arg(value: cst.BaseExpression, keyword: Optional[str] = None) -> cst.Arg:
    if keyword is None:
        return cst.Arg(value=value)
    return cst.Arg(value=value, keyword=cst.Name(keyword), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


def make_call(func: cst.BaseExpression, positional: Sequence[cst.BaseExpression] = (), keywords: Sequence[Tuple[str, cst.BaseExpression]] = ()) -> cst.Call:
    args = [_arg(value) for value in positional] + [_arg(value, name) for name, value in keywords]
    separated = [
        arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) if index < len(args) - 1 else arg
        for index, arg in enumerate(args)
    ]
    return cst.Call(func=func, args=separated)


def _string(text: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{text}"')


def _upper_as_uplo(upper: Optional[cst.BaseExpression]) -> cst.BaseExpression:
    """``UPLO=`` of torch.linalg for an old ``upper=`` (default True: the upper triangle)."""
    flag = literal_bool(upper) if upper is not None else True
    if flag is not None:
        return _string("U" if flag else "L")
    return cst.IfExp(test=upper, body=_string("U"), orelse=_string("L"))


# -- where the program reads the result -------------------------------------------------------------


@dataclass(frozen=True)
class FieldUse:
    """The expression that reads one field of a call's tuple result and nothing else."""

    node: cst.CSTNode  # replaced by the rewrite: the subscript, the attribute, or the whole assignment
    target: Optional[cst.BaseExpression] = None  # for ``x, _ = call``: the name the field was bound to


def field_use(context: "FileContext", call: cst.Call, fields: Sequence[str], index: int) -> Optional[FieldUse]:
    """How the program reads field ``index`` (named ``fields[index]``) of ``call``'s result, when it reads
    nothing else of it: ``call[index]``, ``call.<field>``, or ``a, _ = call`` with every other target ``_``.
    ``context.ancestors`` must end at the call's parent (the rule visits the call)."""
    parent = context.parent
    if isinstance(parent, cst.Subscript) and parent.value is call and len(parent.slice) == 1:
        element = parent.slice[0].slice
        if isinstance(element, cst.Index) and _integer(element.value) == index:
            return FieldUse(parent)
    if isinstance(parent, cst.Attribute) and parent.value is call and parent.attr.value == fields[index]:
        return FieldUse(parent)
    if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(fields):
            elements = [element for element in target.elements if isinstance(element, cst.Element)]
            if len(elements) == len(fields) and all(
                position == index or (isinstance(element.value, cst.Name) and element.value.value == "_")
                for position, element in enumerate(elements)
            ):
                return FieldUse(parent, elements[index].value)
    return None


def _replace_field_use(use: FieldUse, new_call: cst.Call) -> Replacement:
    if use.target is None:
        return Replacement(use.node, new_call)
    assign = use.node
    assert isinstance(assign, cst.Assign)
    return Replacement(assign, assign.with_changes(targets=[cst.AssignTarget(target=use.target)], value=new_call))


# -- the recipes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallSite:
    """A call of a changed API: ``call``, its qualified name, and the receiver of a method call (``B`` of ``B.solve(A)``)."""

    call: cst.Call
    name: str
    receiver: Optional[cst.BaseExpression] = None


Recipe = Callable[["FileContext", CallSite], Optional[FixSpec]]


def _fix(message: str, replacement: Replacement, imports: Imports, applicability: Applicability = Applicability.SAFE) -> FixSpec:
    return FixSpec(applicability, message, (replacement,), tuple(dict.fromkeys(imports)))


def _solve(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("input", "A"), ("out",), site.receiver)
    use = field_use(context, site.call, ("solution", "LU"), 0)
    reference = _reference_node(context, "torch.linalg.solve")
    if args is None or "out" in args or set(args) != {"input", "A"} or use is None or reference is None:
        return None
    new = make_call(reference[0], (args["A"], args["input"]))
    return _fix("Use `torch.linalg.solve(A, B)` (arguments swapped; it returns the solution only)", _replace_field_use(use, new), reference[1])


def _symeig(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("input", "eigenvectors", "upper"), ("out",), site.receiver)
    if args is None or "out" in args:
        return None
    uplo = ("UPLO", _upper_as_uplo(args.get("upper")))
    vectors = literal_bool(args.get("eigenvectors")) if "eigenvectors" in args else False
    if vectors is True:
        reference = _reference_node(context, "torch.linalg.eigh")
        if reference is None:
            return None
        new = make_call(reference[0], (args["input"],), (uplo,))
        return _fix("Use `torch.linalg.eigh(A, UPLO=...)` (symeig read the upper triangle by default)", Replacement(site.call, new), reference[1])
    use = field_use(context, site.call, ("eigenvalues", "eigenvectors"), 0)
    reference = _reference_node(context, "torch.linalg.eigvalsh")
    if vectors is None or use is None or reference is None:
        return None
    new = make_call(reference[0], (args["input"],), (uplo,))
    return _fix("Use `torch.linalg.eigvalsh(A, UPLO=...)` (symeig read the upper triangle by default)", _replace_field_use(use, new), reference[1])


def _matrix_rank(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("input", "tol", "symmetric"), ("out",), site.receiver)
    reference = _reference_node(context, "torch.linalg.matrix_rank")
    if args is None or reference is None:
        return None
    keywords: List[Tuple[str, cst.BaseExpression]] = []
    if "tol" in args and not (isinstance(args["tol"], cst.Name) and args["tol"].value == "None"):
        # An absolute threshold: singular values above ``tol`` count, whatever the largest one is.
        keywords += [("atol", args["tol"]), ("rtol", cst.Integer("0"))]
    if "symmetric" in args and literal_bool(args["symmetric"]) is not False:
        keywords.append(("hermitian", args["symmetric"]))
    if "out" in args:
        keywords.append(("out", args["out"]))
    new = make_call(reference[0], (args["input"],), keywords)
    return _fix("Use `torch.linalg.matrix_rank` (tol becomes atol with rtol=0, symmetric becomes hermitian)", Replacement(site.call, new), reference[1])


def _cholesky(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("input", "upper"), ("out",), site.receiver)
    reference = _reference_node(context, "torch.linalg.cholesky")
    if args is None or reference is None:
        return None
    keywords = [(name, args[name]) for name in ("upper", "out") if name in args and not (name == "upper" and literal_bool(args[name]) is False)]
    new = make_call(reference[0], (args["input"],), keywords)
    return _fix("Use `torch.linalg.cholesky` (same factor; `upper=` kept)", Replacement(site.call, new), reference[1])


def _chain_matmul(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    call = site.call
    if has_star_args(call) or site.receiver is not None:
        return None
    matrices = [arg.value for arg in call.args if arg.keyword is None]
    keywords = [(arg.keyword.value, arg.value) for arg in call.args if arg.keyword is not None]
    reference = _reference_node(context, "torch.linalg.multi_dot")
    # multi_dot needs two matrices at least; chain_matmul(A) returned A.
    if len(matrices) < 2 or any(name != "out" for name, _ in keywords) or reference is None:
        return None
    new = make_call(reference[0], (_list_with_commas(matrices),), keywords)
    return _fix("Use `torch.linalg.multi_dot([...])`", Replacement(call, new), reference[1])


def _list_with_commas(values: Sequence[cst.BaseExpression]) -> cst.List:
    elements = [
        cst.Element(value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if index < len(values) - 1 else cst.MaybeSentinel.DEFAULT)
        for index, value in enumerate(values)
    ]
    return cst.List(elements)


def _qr(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("input", "some"), ("out",), site.receiver)
    reference = _reference_node(context, "torch.linalg.qr")
    if args is None or reference is None:
        return None
    keywords: List[Tuple[str, cst.BaseExpression]] = []
    if "some" in args:
        some = literal_bool(args["some"])
        if some is False:
            keywords.append(("mode", _string("complete")))
        elif some is None:
            keywords.append(("mode", cst.IfExp(test=args["some"], body=_string("reduced"), orelse=_string("complete"))))
    if "out" in args:
        keywords.append(("out", args["out"]))
    new = make_call(reference[0], (args["input"],), keywords)
    return _fix("Use `torch.linalg.qr` (`some=False` is `mode=\"complete\"`)", Replacement(site.call, new), reference[1])


def _lu(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("A", "pivot", "get_infos", "out"), (), site.receiver)
    if args is None or "out" in args:
        return None
    infos = literal_bool(args["get_infos"]) if "get_infos" in args else False
    if infos is None:
        return None
    reference = _reference_node(context, "torch.linalg.lu_factor_ex" if infos else "torch.linalg.lu_factor")
    if reference is None:
        return None
    keywords = [("pivot", args["pivot"])] if "pivot" in args and literal_bool(args["pivot"]) is not True else []
    new = make_call(reference[0], (args["A"],), keywords)
    name = "lu_factor_ex" if infos else "lu_factor"
    return _fix(f"Use `torch.linalg.{name}`", Replacement(site.call, new), reference[1])


def _lu_solve(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("b", "LU_data", "LU_pivots"), ("out",), site.receiver)
    reference = _reference_node(context, "torch.linalg.lu_solve")
    if args is None or set(args) - {"out"} != {"b", "LU_data", "LU_pivots"} or reference is None:
        return None
    keywords = [("out", args["out"])] if "out" in args else []
    new = make_call(reference[0], (args["LU_data"], args["LU_pivots"], args["b"]), keywords)
    return _fix("Use `torch.linalg.lu_solve(LU, pivots, B)` (the right-hand side goes last)", Replacement(site.call, new), reference[1])


def _triangular_solve(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("b", "A", "upper", "transpose", "unitriangular"), ("out",), site.receiver)
    use = field_use(context, site.call, ("solution", "cloned_coefficient"), 0)
    reference = _reference_node(context, "torch.linalg.solve_triangular")
    if args is None or "out" in args or use is None or reference is None or {"b", "A"} - set(args):
        return None
    if "transpose" in args and literal_bool(args["transpose"]) is not False:
        return None
    keywords: List[Tuple[str, cst.BaseExpression]] = [("upper", args.get("upper", cst.Name("True")))]
    if "unitriangular" in args and literal_bool(args["unitriangular"]) is not False:
        keywords.append(("unitriangular", args["unitriangular"]))
    new = make_call(reference[0], (args["A"], args["b"]), keywords)
    return _fix("Use `torch.linalg.solve_triangular(A, B, upper=...)` (arguments swapped; it returns the solution only)", _replace_field_use(use, new), reference[1])


def _svd(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("input", "some", "compute_uv"), ("out",), site.receiver)
    use = field_use(context, site.call, ("U", "S", "V"), 1)
    reference = _reference_node(context, "torch.linalg.svdvals")
    if args is None or "out" in args or use is None or reference is None:
        return None
    new = make_call(reference[0], (args["input"],))
    return _fix("Use `torch.linalg.svdvals` (only the singular values are read)", _replace_field_use(use, new), reference[1])


def _norm(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    """torch.norm is torch.linalg.vector_norm for a numeric order, and for the default Frobenius norm over
    at most two dimensions (torch.norm itself dispatches so); ``nuc`` and ``out=`` are left alone."""
    args = bind(site.call, ("input", "p", "dim", "keepdim", "out", "dtype"), (), site.receiver)
    reference = _reference_node(context, "torch.linalg.vector_norm")
    if args is None or "out" in args or reference is None:
        return None
    order = args.get("p")
    frobenius = order is None or (isinstance(order, cst.SimpleString) and order.evaluated_value == "fro")
    if not (frobenius or _is_number(order)):
        return None
    positional = [args["input"]] + ([] if frobenius else [order])
    keywords = [(name, args[name]) for name in ("dim", "keepdim", "dtype") if name in args]
    new = make_call(reference[0], positional, keywords)
    return _fix("Use `torch.linalg.vector_norm`", Replacement(site.call, new), reference[1])


def _range(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("start", "end", "step"), ("out", "dtype", "layout", "device", "requires_grad"), site.receiver)
    reference = _reference_node(context, "torch.arange")
    if args is None or {"start", "end"} - set(args) or reference is None:
        return None
    start, end, step = args["start"], args["end"], args.get("step")
    step_value = 1 if step is None else _integer(step)
    end_value, start_value = _integer(end), _integer(start)
    if step_value is not None and end_value is not None:
        new_end: cst.BaseExpression = _integer_literal(end_value + step_value)
    elif step_value == 1 and isinstance(end, cst.BinaryOperation) and isinstance(end.operator, cst.Subtract) and _integer(end.right) == 1 and not end.lpar:
        new_end = end.left  # torch.range(0, n - 1) is torch.arange(0, n)
    else:
        step_node = step if step is not None else cst.Integer("1")
        new_end = cst.BinaryOperation(left=_parenthesised(end), operator=cst.Add(), right=_parenthesised(step_node))
    keywords = [(name, args[name]) for name in ("out", "dtype", "layout", "device", "requires_grad") if name in args]
    imports: Imports = reference[1]
    if "dtype" not in args:
        # torch.range returns the default float dtype whatever its arguments; arange would infer int64.
        default_dtype = _reference_node(context, "torch.get_default_dtype")
        if default_dtype is None:
            return None
        keywords.insert(0, ("dtype", cst.Call(func=default_dtype[0])))
        imports += default_dtype[1]
    positional = [start, new_end] + ([step] if step is not None else [])
    new = make_call(reference[0], positional, keywords)
    exact = start_value is not None and end_value is not None and step_value not in (None, 0) and (end_value - start_value) % step_value == 0
    applicability = Applicability.SAFE if exact else Applicability.UNSAFE
    return _fix("Use `torch.arange(start, end + step, step, dtype=...)` (arange excludes its end)", Replacement(site.call, new), imports, applicability)


def _integer_literal(value: int) -> cst.BaseExpression:
    return cst.Integer(str(value)) if value >= 0 else cst.UnaryOperation(cst.Minus(), cst.Integer(str(-value)))


def _parenthesised(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _interpolate_with(mode: str, align_corners: bool) -> Recipe:
    def recipe(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
        args = bind(site.call, ("input", "size", "scale_factor"))
        reference = _reference_node(context, "torch.nn.functional.interpolate")
        if args is None or reference is None:
            return None
        renamed = renamed_reference(context, site.call.func, site.name, "torch.nn.functional.interpolate")
        func, imports = renamed if renamed is not None else reference
        keywords = [(name, args[name]) for name in ("size", "scale_factor") if name in args]
        keywords += [("mode", _string(mode))] + ([("align_corners", cst.Name("True"))] if align_corners else [])
        new = make_call(func, (args["input"],), keywords)
        return _fix(f"Use `F.interpolate(..., mode=\"{mode}\"{', align_corners=True' if align_corners else ''})`", Replacement(site.call, new), imports)

    return recipe


def _upsample_module(mode: str, align_corners: bool) -> Recipe:
    def recipe(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
        args = bind(site.call, ("size", "scale_factor"))
        found = renamed_reference(context, site.call.func, site.name, "torch.nn.Upsample")
        if args is None or found is None:
            return None
        keywords = [(name, args[name]) for name in ("size", "scale_factor") if name in args]
        keywords += [("mode", _string(mode))] + ([("align_corners", cst.Name("True"))] if align_corners else [])
        new = make_call(found[0], (), keywords)
        return _fix(f"Use `nn.Upsample(..., mode=\"{mode}\"{', align_corners=True' if align_corners else ''})`", Replacement(site.call, new), found[1])

    return recipe


def _amp_with_device(new_name: str, device: str, parameters: Sequence[str]) -> Recipe:
    """``torch.cuda.amp.X(a, b)`` -> ``torch.amp.X("cuda", p1=a, p2=b)``: the new first parameter is the device."""

    def recipe(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
        args = bind(site.call, parameters)
        reference = _reference_node(context, new_name)
        if args is None or reference is None:
            return None
        first = args.get(parameters[0])
        if isinstance(first, cst.SimpleString):
            # The new API's device written into the old class (``torch.cuda.amp.GradScaler("cuda")`` takes it for
            # ``init_scale`` and fails at the first step): that device is what the call meant, nothing else.
            if first.evaluated_value != device:
                return None
            args = {name: value for name, value in args.items() if name != parameters[0]}
        keywords = [(name, args[name]) for name in parameters if name in args]
        new = make_call(reference[0], (_string(device),), keywords)
        return _fix(f"Use `{new_name}(\"{device}\", ...)`", Replacement(site.call, new), reference[1])

    return recipe


def _amp_decorator(new_name: str) -> Recipe:
    """``torch.cuda.amp.custom_fwd(cast_inputs=t)`` -> ``torch.amp.custom_fwd(device_type="cuda", cast_inputs=t)``."""

    def recipe(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
        args = bind(site.call, ("fwd",) if new_name.endswith("fwd") else ("bwd",), ("cast_inputs",))
        reference = _reference_node(context, new_name)
        if args is None or reference is None:
            return None
        positional = [value for name, value in args.items() if name in ("fwd", "bwd")]
        keywords = [("device_type", _string("cuda"))] + [(name, value) for name, value in args.items() if name == "cast_inputs"]
        new = make_call(reference[0], positional, keywords)
        return _fix(f"Use `{new_name}(device_type=\"cuda\")`", Replacement(site.call, new), reference[1])

    return recipe


def amp_decorator_reference(context: "FileContext", node: cst.BaseExpression, name: str) -> Optional[FixSpec]:
    """A bare decorator ``@torch.cuda.amp.custom_fwd`` -> ``@torch.amp.custom_fwd(device_type="cuda")``."""
    new_name = {"torch.cuda.amp.custom_fwd": "torch.amp.custom_fwd", "torch.cuda.amp.custom_bwd": "torch.amp.custom_bwd"}.get(name)
    reference = _reference_node(context, new_name) if new_name else None
    if reference is None:
        return None
    new = make_call(reference[0], (), (("device_type", _string("cuda")),))
    return _fix(f"Use `@{new_name}(device_type=\"cuda\")`", Replacement(node, new), reference[1])


# sdp_kernel's flags, in its parameter order, and the backend each enables (in the order it lists them).
# The prefix of a tensor method's qualified name.
TENSOR_METHOD = "torch.Tensor."

_SDP_FLAGS = ("enable_flash", "enable_math", "enable_mem_efficient", "enable_cudnn")
_SDP_BACKENDS = (("enable_flash", "FLASH_ATTENTION"), ("enable_mem_efficient", "EFFICIENT_ATTENTION"), ("enable_math", "MATH"), ("enable_cudnn", "CUDNN_ATTENTION"))


def _sdp_kernel(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, _SDP_FLAGS)
    kernel = _reference_node(context, "torch.nn.attention.sdpa_kernel")
    backend = _reference_node(context, "torch.nn.attention.SDPBackend")
    if args is None or kernel is None or backend is None:
        return None
    flags = {name: literal_bool(args[name]) if name in args else True for name in _SDP_FLAGS}
    if None in flags.values():
        return None
    members = [cst.Attribute(value=backend[0], attr=cst.Name(member)) for flag, member in _SDP_BACKENDS if flags[flag]]
    new = make_call(kernel[0], (_list_with_commas(members),))
    return _fix("Use `torch.nn.attention.sdpa_kernel([...])` with the backends the flags enabled", Replacement(site.call, new), kernel[1] + backend[1])


def _register_pytree_node(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("typ", "flatten_fn", "unflatten_fn", "to_str_fn", "maybe_from_str_fn"),
                ("serialized_type_name", "to_dumpable_context", "from_dumpable_context"))
    renamed = renamed_reference(context, site.call.func, site.name, "torch.utils._pytree.register_pytree_node")
    if args is None or renamed is None or {"to_str_fn", "maybe_from_str_fn"} & set(args):
        return None
    return _fix("Use `register_pytree_node`", Replacement(site.call.func, renamed[0]), renamed[1])


# torch.set_default_tensor_type(<CPU float type>) sets the default dtype and nothing else.
_CPU_TENSOR_TYPES = {"torch.FloatTensor": "float32", "torch.DoubleTensor": "float64"}


def _set_default_tensor_type(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
    args = bind(site.call, ("t",))
    if args is None or "t" not in args:
        return None
    written = args["t"]
    qualified = written.evaluated_value if isinstance(written, cst.SimpleString) else context.qualified_name(written)
    dtype = _CPU_TENSOR_TYPES.get(qualified or "")
    setter = _reference_node(context, "torch.set_default_dtype")
    value = _reference_node(context, f"torch.{dtype}") if dtype else None
    if setter is None or value is None:
        return None  # a CUDA tensor type also moves factories to the GPU: set_default_device, by hand
    new = make_call(setter[0], (value[0],))
    return _fix(f"Use `torch.set_default_dtype(torch.{dtype})`", Replacement(site.call, new), setter[1] + value[1])


def _is_size(context: "FileContext", node: cst.BaseExpression) -> bool:
    """A shape written as one value: ``(n, n)``, ``[2, 3]``, ``torch.Size([2, 3])``, ``x.shape``, ``x.size()``."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return True
    if isinstance(node, cst.Attribute) and node.attr.value == "shape":
        return True
    if isinstance(node, cst.Call):
        if context.qualified_name(node.func) == "torch.Size":
            return True
        return isinstance(node.func, cst.Attribute) and node.func.attr.value == "size" and not node.args
    return False


def _legacy_sparse(dtype: str) -> Recipe:
    """``torch.sparse.FloatTensor(i, v, size)`` -> ``torch.sparse_coo_tensor(i, v, size)``: torch 2.13 builds it
    that way (the values give the dtype and the device, whatever the type's name says); a tensor built from
    a shape alone (``torch.sparse.FloatTensor(2, 3)``) takes the type's dtype, which the rewrite states."""

    def recipe(context: "FileContext", site: CallSite) -> Optional[FixSpec]:
        call = site.call
        if has_star_args(call) or any(arg.keyword is not None for arg in call.args):
            return None  # device=: the legacy constructor checked it against the type; left to the reader
        constructor = _reference_node(context, "torch.sparse_coo_tensor")
        if constructor is None:
            return None
        values = [arg.value for arg in call.args]
        here = site_of(context.ancestors)
        if len(values) in (2, 3) and (
            all(value_kind(context, value, here) == "tensor" for value in values[:2])
            or (len(values) == 3 and _is_size(context, values[2]))
        ):
            new = call.with_changes(func=constructor[0])
            return _fix("Use `torch.sparse_coo_tensor` (the values give the dtype, as they did)", Replacement(call, new), constructor[1])
        if values and all(isinstance(value, cst.Integer) for value in values):
            kind = _reference_node(context, f"torch.{dtype}")
            if kind is None:
                return None
            shape = cst.Tuple([cst.Element(value) for value in values]) if len(values) > 1 else cst.Tuple([cst.Element(values[0])])
            new = make_call(constructor[0], (shape,), (("dtype", kind[0]),))
            return _fix(f"Use `torch.sparse_coo_tensor(shape, dtype=torch.{dtype})`", Replacement(call, new), constructor[1] + kind[1])
        return None  # (a, b) of unknown kinds: indices and values, or a shape?

    return recipe


_RECIPES: Dict[str, Recipe] = {
    "torch.solve": _solve,
    "torch.Tensor.solve": _solve,
    "torch.symeig": _symeig,
    "torch.Tensor.symeig": _symeig,
    "torch.matrix_rank": _matrix_rank,
    "torch.cholesky": _cholesky,
    "torch.chain_matmul": _chain_matmul,
    "torch.qr": _qr,
    "torch.lu": _lu,
    "torch.lu_solve": _lu_solve,
    "torch.triangular_solve": _triangular_solve,
    "torch.svd": _svd,
    "torch.Tensor.cholesky": _cholesky,
    "torch.Tensor.qr": _qr,
    "torch.Tensor.lu": _lu,
    "torch.Tensor.lu_solve": _lu_solve,
    "torch.Tensor.triangular_solve": _triangular_solve,
    "torch.Tensor.svd": _svd,
    "torch.norm": _norm,
    "torch.range": _range,
    "torch.nn.functional.upsample_nearest": _interpolate_with("nearest", False),
    "torch.nn.functional.upsample_bilinear": _interpolate_with("bilinear", True),
    "torch.nn.UpsamplingNearest2d": _upsample_module("nearest", False),
    "torch.nn.UpsamplingBilinear2d": _upsample_module("bilinear", True),
    "torch.cuda.amp.autocast": _amp_with_device("torch.amp.autocast", "cuda", ("enabled", "dtype", "cache_enabled")),
    "torch.cpu.amp.autocast": _amp_with_device("torch.amp.autocast", "cpu", ("enabled", "dtype", "cache_enabled")),
    "torch.cuda.amp.GradScaler": _amp_with_device(
        "torch.amp.GradScaler", "cuda", ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
    ),
    "torch.cpu.amp.GradScaler": _amp_with_device(
        "torch.amp.GradScaler", "cpu", ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
    ),
    "torch.cuda.amp.custom_fwd": _amp_decorator("torch.amp.custom_fwd"),
    "torch.cuda.amp.custom_bwd": _amp_decorator("torch.amp.custom_bwd"),
    "torch.backends.cuda.sdp_kernel": _sdp_kernel,
    "torch.utils._pytree._register_pytree_node": _register_pytree_node,
    "torch.set_default_tensor_type": _set_default_tensor_type,
    # torch.cuda.sparse.*: no rewrite (this CPU-only test machine cannot show what the CUDA types build).
    **{f"torch.sparse.{kind}Tensor": _legacy_sparse(dtype) for kind, dtype in LEGACY_SPARSE_DTYPES.items()},
}


def rewrite_call(context: "FileContext", site: CallSite, rename_to: Optional[str]) -> Optional[FixSpec]:
    """The fix for a call of a changed API: its recipe, else a plain rename to a drop-in replacement."""
    recipe = _RECIPES.get(site.name)
    if recipe is not None:
        return recipe(context, site)
    if rename_to is not None and site.receiver is None:
        return rename_reference(context, site.call.func, site.name, rename_to)
    if rename_to is not None and rename_to.startswith(TENSOR_METHOD) and isinstance(site.call.func, cst.Attribute):
        method = rename_to[len(TENSOR_METHOD) :]  # an alias method: ``a.ger(b)`` -> ``a.outer(b)``
        return _fix(f"Use `.{method}()`", Replacement(site.call.func.attr, cst.Name(method)), ())
    return None


def six_reference(context: "FileContext", node: cst.BaseExpression, qualified: str) -> Optional[FixSpec]:
    """``torch._six.inf`` -> ``math.inf``, ``torch._six.string_classes`` -> ``(str, bytes)``: what the name held."""
    key = next((name for name in SIX_VALUES if qualified == name or qualified.startswith(name + ".")), None)
    if key is None or isinstance(node, cst.Name):
        return None  # a bare name bound by ``from torch._six import ...``: the import's fix binds it
    value = SIX_VALUES[key]
    while isinstance(node, cst.Attribute) and context.qualified_name(node) != key:
        node = node.value  # torch._six.container_abcs.Mapping: replace the torch._six part
    if not isinstance(node, cst.Attribute):
        return None
    if "." in value:
        found = _reference_node(context, value)
        if found is None:
            return None
        return _fix(f"Use `{value}`", Replacement(node, found[0]), found[1])
    if context.binds_name(value.strip("()").split(",")[0].strip()):
        return None  # ``int`` or ``str`` rebound in this file
    return _fix(f"Use `{value}`, what torch._six held", Replacement(node, cst.parse_expression(value)), ())


def rename_reference(context: "FileContext", node: cst.BaseExpression, old: str, new: str) -> Optional[FixSpec]:
    """Rename a reference to a drop-in replacement; a bare name bound by ``from ... import`` is left to the
    import's own fix (renaming it there keeps every use right)."""
    if isinstance(node, cst.Name):
        return None
    renamed = renamed_reference(context, node, old, new)
    if renamed is None:
        return None
    return _fix(f"Use `{new}`", Replacement(node, renamed[0]), renamed[1])


def rename_import(statement: cst.ImportFrom, module: str, renames: Dict[str, str]) -> Optional[FixSpec]:
    """``from functorch import vmap, grad`` -> ``from torch.func import vmap, grad`` when every name imported
    has a drop-in replacement in one module; a changed last name keeps the local one (``uniform_ as uniform``).
    The module and each name are replaced, not the statement: the rest of the line stays as written."""
    if isinstance(statement.names, cst.ImportStar) or statement.relative or statement.module is None:
        return None
    targets = []
    for alias in statement.names:
        new = renames.get(f"{module}.{alias.evaluated_name}")
        if new is None:
            return None
        targets.append(new.rpartition("."))
    new_modules = {new_module for new_module, _, _ in targets}
    if len(new_modules) != 1:
        return None
    new_module = new_modules.pop()
    replacements = [Replacement(statement.module, cst.parse_expression(new_module))]
    for alias, (_, _, new_last) in zip(statement.names, targets):
        if new_last == alias.evaluated_name:
            continue
        if alias.asname is None:  # keep the local name the file uses
            # The name is replaced, not the alias: an alias node holds its comma, which its position leaves out.
            replacements.append(Replacement(alias.name, f"{new_last} as {alias.evaluated_name}"))
        else:
            replacements.append(Replacement(alias.name, cst.Name(new_last)))
    return FixSpec(Applicability.SAFE, f"Import from `{new_module}`", tuple(replacements))
