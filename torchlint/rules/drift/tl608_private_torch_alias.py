from __future__ import annotations

from typing import Dict, Optional

from torchlint.analysis.api.api_drift import PUBLIC_TWINS, ApiChange, Status
from torchlint.rule import Applicability
from torchlint.rules.drift.api_uses import ApiUseRule


class PrivateTorchAlias(ApiUseRule):
    """
    ## What it does
    Flags a call, a reference or an import of a torch name reached through a
    private module when torch exports the same object publicly:
    `torch.utils.data._utils.collate.default_collate` (and `default_convert`),
    public as `torch.utils.data.default_collate` since torch 1.11.

    ## Why is this bad?
    A path with an underscore (`_utils`) is torch's own business: it is
    moved or renamed between releases without deprecation, and code that
    imports it breaks with `ImportError` on the release that does. The
    public name is the same function and is kept stable.

    ## Example
    ```python
    from torch.utils.data._utils.collate import default_collate
    ```

    ## Use instead
    ```python
    from torch.utils.data import default_collate
    ```

    ## Fix safety
    Safe: the public name is the same object (`is`), so every use behaves
    identically. Imports are rewritten when every name they import has a
    public twin; calls and references through a module alias are renamed.
    Not flagged for a `target-torch-version` older than the release that
    made the name public.
    """

    code = "TL608"
    name = "private-torch-alias"
    message = "a private torch path that moves between releases without notice: import the public name"
    fix_applicability = Applicability.SAFE
    status = Status.DEPRECATED

    @classmethod
    def known(cls, name: str) -> bool:
        return name in PUBLIC_TWINS

    def changed(self, name: Optional[str]) -> Optional[ApiChange]:
        twin = PUBLIC_TWINS.get(name or "")
        if twin is None or self.target < twin[1]:
            return None
        return ApiChange(name, rename_to=twin[0], source="torch exports the same object publicly")

    def describe(self, change: ApiChange, used: str, form: str) -> str:
        return f"`{used}` is a private path that torch may move in any release; use `{change.rename_to}` (the same object)"

    def renames(self) -> Dict[str, str]:
        return {private: public for private, (public, _) in PUBLIC_TWINS.items()}
