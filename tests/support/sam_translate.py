"""Expand a SAM template with the SAM translator, once per parameter set.

Runs under ``.venv-sam/bin/python`` (the translator, ``samtranslator``, comes with the
pinned SAM CLI there; its dependencies conflict with the project's ``.venv``)::

    .venv-sam/bin/python tests/support/sam_translate.py < request.json

The request is ``{"template": <the template as CloudFormation JSON>, "parameter_sets":
[{name: value, ...}, ...]}``; the answer, on stdout, is a JSON list with one
``{"template": <translated>}`` or ``{"error": <the translator's message>}`` per set, in
order. Local ``CodeUri``/``ContentUri`` paths become ``s3://`` URIs first, as ``sam
package`` (and ``sam validate``) make them: the translator accepts nothing else. No AWS
call is made (no managed policy is named by name in the template, so the policy map is
empty). ``tests/support/deploy_rehearsal.py`` is its caller.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

_LOCAL_URIS = {
    "AWS::Serverless::Function": "CodeUri",
    "AWS::Serverless::LayerVersion": "ContentUri",
}


def _packaged(template: dict[str, Any]) -> dict[str, Any]:
    packaged = copy.deepcopy(template)
    for name, resource in packaged.get("Resources", {}).items():
        key = _LOCAL_URIS.get(resource.get("Type", ""))
        properties = resource.get("Properties", {})
        if key and isinstance(properties.get(key), str):
            properties[key] = f"s3://rehearsal-artifacts/{name}.zip"
    return packaged


def main() -> int:
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    request = json.load(sys.stdin)
    packaged = _packaged(request["template"])
    answers: list[dict[str, Any]] = []
    for parameters in request["parameter_sets"]:
        translator = Translator(managed_policy_map=None, sam_parser=Parser(), plugins=[])
        try:
            translated = translator.translate(
                sam_template=copy.deepcopy(packaged),
                parameter_values=dict(parameters),
                get_managed_policy_map=dict,
            )
        except InvalidDocumentException as exc:
            causes = "; ".join(str(c) for c in exc.causes)
            answers.append({"error": f"{exc} {causes}".strip()})
            continue
        answers.append({"template": translated})
    json.dump(answers, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
