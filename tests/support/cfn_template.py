"""template.yaml read as data: a YAML loader for the CloudFormation short tags, and a small
evaluator of the intrinsic functions for one set of parameter values.

The evaluator covers what the template uses (Ref, Fn::Sub, Fn::If, Fn::Join, Fn::Select,
Fn::Split, Fn::FindInMap, Fn::GetAtt, Fn::Equals/And/Or/Not, Condition) so that tests can
read the policies as the deployed stack would have them; ``Fn::GetAtt`` becomes
``"<Resource>.<Attribute>"`` and stack pseudo parameters get fixed sample values.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = REPO_ROOT / "template.yaml"
NO_VALUE = object()

PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "kb-test",
    "AWS::StackId": (
        "arn:aws:cloudformation:us-east-1:123456789012:stack/kb-test/"
        "51af3dc0-da77-11e4-872e-1234567db123"
    ),
    "AWS::URLSuffix": "amazonaws.com",
}
CREATED_DOMAIN_NAME = "kb-51af3dc0"


class _Loader(yaml.SafeLoader):
    pass


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _tag)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    return loaded


class Stack:
    """The template evaluated for ``parameters`` (defaults fill the rest)."""

    def __init__(self, template: Mapping[str, Any], parameters: Mapping[str, str]) -> None:
        self.template = template
        self.parameters = {
            name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()
        }
        self.parameters.update(parameters)
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.evaluate(self.template["Conditions"][name]))
        return self._conditions[name]

    def resources(self) -> dict[str, dict[str, Any]]:
        """The resources the stack would create (their Condition holds)."""
        return {
            name: resource
            for name, resource in self.template["Resources"].items()
            if "Condition" not in resource or self.condition(resource["Condition"])
        }

    def evaluate(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.evaluate(v) for v in value]
            return [i for i in items if i is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return NO_VALUE
                if arg in PSEUDO:
                    return PSEUDO[arg]
                if arg in self.parameters:
                    return self.parameters[arg]
                return f"{arg}.Ref"
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::If":
                name, when_true, when_false = arg
                return self.evaluate(when_true if self.condition(name) else when_false)
            if key == "Fn::Equals":
                left, right = (self.evaluate(a) for a in arg)
                return str(left) == str(right)
            if key == "Fn::And":
                return all(self.evaluate(a) for a in arg)
            if key == "Fn::Or":
                return any(self.evaluate(a) for a in arg)
            if key == "Fn::Not":
                return not self.evaluate(arg[0])
            if key == "Fn::Join":
                sep, items = arg
                return sep.join(str(i) for i in self.evaluate(items))
            if key == "Fn::Split":
                sep, text = arg
                return str(self.evaluate(text)).split(sep)
            if key == "Fn::Select":
                index, items = arg
                return self.evaluate(items)[int(self.evaluate(index))]
            if key == "Fn::FindInMap":
                mapping, first, second = (self.evaluate(a) for a in arg)
                return self.template["Mappings"][mapping][first][second]
            if key == "Fn::GetAtt":
                return ".".join(arg)
            if key == "Fn::Sub":
                return self._sub(arg)
        evaluated = {k: self.evaluate(v) for k, v in value.items()}
        return {k: v for k, v in evaluated.items() if v is not NO_VALUE}

    def _sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            text, variables = arg[0], {k: self.evaluate(v) for k, v in arg[1].items()}
        else:
            text, variables = arg, {}
        out, i = [], 0
        while i < len(text):
            start = text.find("${", i)
            if start == -1:
                out.append(text[i:])
                break
            out.append(text[i:start])
            end = text.index("}", start)
            name = text[start + 2 : end]
            if name.startswith("!"):  # ${!Literal} stays ${Literal}
                out.append("${" + name[1:] + "}")
            elif name in variables:
                out.append(str(variables[name]))
            elif name in PSEUDO:
                out.append(PSEUDO[name])
            elif name in self.parameters:
                out.append(self.parameters[name])
            else:  # Resource or Resource.Attribute
                out.append(name if "." in name else f"{name}.Ref")
            i = end + 1
        return "".join(out)

    def statements(self, function: str) -> list[dict[str, Any]]:
        """The IAM statements of a function's inline ``Policies`` (SAM policy templates
        are left out; a function without ``Policies`` has none)."""
        properties = self.template["Resources"][function]["Properties"]
        policies = self.evaluate(properties.get("Policies", []))
        found: list[dict[str, Any]] = []
        for policy in policies:
            if isinstance(policy, dict) and "Statement" in policy:
                found.extend(policy["Statement"])
        return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def allows(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    """Whether an Allow statement grants ``action`` on ``resource`` (IAM wildcards: ``*``
    matches any characters, ``/`` included, and ``?`` one), with no Deny considered."""
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = as_list(statement.get("Action", []))
        if not any(fnmatch.fnmatchcase(action, a) for a in actions):
            continue
        if any(fnmatch.fnmatchcase(resource, r) for r in as_list(statement.get("Resource", []))):
            return True
    return False
