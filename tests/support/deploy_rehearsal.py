"""A deploy rehearsal without an AWS account: what CloudFormation would do with
template.yaml for one set of parameter values, up to the point of creating resources.

1. ``parameter_problems``: the values against the Parameters' constraints, as CloudFormation
   checks them before anything else (unknown names, AllowedValues, AllowedPattern matched
   against the whole value, Min/MaxLength, Number and Min/MaxValue).
2. ``refusals``: the Rules, evaluated with the rule functions CloudFormation allows there
   (Fn::Equals, And, Or, Not, Contains, EachMemberEquals, EachMemberIn, Ref); any other
   function in a Rule is itself an error, as CloudFormation refuses it.
3. ``Deployment``: the template the SAM translator expanded (``sam_translate.py``), its
   Conditions resolved, the resources that would be created, and every property and
   output evaluated strictly: a Ref or GetAtt must name a parameter, a pseudo parameter or
   a resource that is created; Fn::Select must be in range; DependsOn must name created
   resources. Each problem is recorded, not raised, so a test can show them all.

References to resources come out as ``<Name>`` / ``<Name.Attribute>`` tokens, so that
grants and names can be compared with the resources they should name.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfn_template import REPO_ROOT, load_template

SAM_PYTHON = REPO_ROOT / ".venv-sam" / "bin" / "python"
TRANSLATE = Path(__file__).resolve().parent / "sam_translate.py"
NO_VALUE = object()

RULE_FUNCTIONS = {
    "Fn::Equals",
    "Fn::And",
    "Fn::Or",
    "Fn::Not",
    "Fn::Contains",
    "Fn::EachMemberEquals",
    "Fn::EachMemberIn",
}
CONDITION_FUNCTIONS = {"Fn::Equals", "Fn::And", "Fn::Or", "Fn::Not", "Condition", "Ref"}


def pseudo_parameters(
    stack_name: str, stack_uuid: str, region: str = "us-east-1"
) -> dict[str, str]:
    account = "123456789012"
    stack_id = f"arn:aws:cloudformation:{region}:{account}:stack/{stack_name}/{stack_uuid}"
    return {
        "AWS::Partition": "aws",
        "AWS::Region": region,
        "AWS::AccountId": account,
        "AWS::StackName": stack_name,
        "AWS::StackId": stack_id,
        "AWS::URLSuffix": "amazonaws.com",
    }


def parameter_problems(template: Mapping[str, Any], given: Mapping[str, str]) -> list[str]:
    """What CloudFormation says of the parameter values before it looks at the Rules."""
    specs: Mapping[str, Mapping[str, Any]] = template["Parameters"]
    problems = [f"Parameters: [{n}] do not exist in the template" for n in given if n not in specs]
    for name, spec in specs.items():
        if name not in given and "Default" not in spec:
            problems.append(f"Parameters: [{name}] must have values")
            continue
        value = str(given.get(name, spec.get("Default")))
        constraint = spec.get("ConstraintDescription", "")
        if "AllowedValues" in spec and value not in [str(v) for v in spec["AllowedValues"]]:
            problems.append(f"{name}: {value!r} is not one of {spec['AllowedValues']}")
        pattern = spec.get("AllowedPattern")
        if pattern is not None and re.fullmatch(pattern, value) is None:
            problems.append(f"{name}: {value!r} fails its pattern: {constraint or pattern}")
        if "MinLength" in spec and len(value) < int(spec["MinLength"]):
            problems.append(f"{name}: shorter than {spec['MinLength']}")
        if "MaxLength" in spec and len(value) > int(spec["MaxLength"]):
            problems.append(f"{name}: longer than {spec['MaxLength']}")
        if spec.get("Type") == "Number":
            try:
                number = float(value)
            except ValueError:
                problems.append(f"{name}: {value!r} is not a number")
                continue
            if "MinValue" in spec and number < float(spec["MinValue"]):
                problems.append(f"{name}: {value} is below {spec['MinValue']}")
            if "MaxValue" in spec and number > float(spec["MaxValue"]):
                problems.append(f"{name}: {value} is above {spec['MaxValue']}")
    return problems


def _values(template: Mapping[str, Any], given: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, spec in template["Parameters"].items():
        value = str(given.get(name, spec.get("Default", "")))
        is_list = spec.get("Type") == "CommaDelimitedList" or spec.get("Type", "").startswith(
            "List<"
        )
        values[name] = value.split(",") if is_list else value
    return values


def _rule_value(expression: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(expression, list):
        return [_rule_value(e, values) for e in expression]
    if not isinstance(expression, dict):
        return expression
    ((key, arg),) = expression.items()
    if key == "Ref":
        return values[arg]
    if key not in RULE_FUNCTIONS:
        raise ValueError(f"{key} is not supported in the Rules block of a template")
    if key == "Fn::Equals":
        left, right = (_rule_value(a, values) for a in arg)
        return left == right
    if key == "Fn::And":
        return all(_rule_value(a, values) for a in arg)
    if key == "Fn::Or":
        return any(_rule_value(a, values) for a in arg)
    if key == "Fn::Not":
        return not _rule_value(arg[0], values)
    listed, other = (_rule_value(a, values) for a in arg)
    if key == "Fn::Contains":
        return other in listed
    if key == "Fn::EachMemberEquals":
        return all(member == other for member in listed)
    return all(member in other for member in listed)  # Fn::EachMemberIn


def refusals(template: Mapping[str, Any], given: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(rule, AssertDescription)`` of every assertion that fails for these values."""
    values = _values(template, given)
    failed: list[tuple[str, str]] = []
    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not _rule_value(rule["RuleCondition"], values):
            continue
        for assertion in rule["Assertions"]:
            if not _rule_value(assertion["Assert"], values):
                failed.append((name, " ".join(assertion["AssertDescription"].split())))
    return failed


def translate(parameter_sets: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """template.yaml expanded by the SAM translator, once per parameter set (one process)."""
    if not SAM_PYTHON.is_file():
        raise RuntimeError(
            f"{SAM_PYTHON} is missing: run `python3 tests/support/sam_cli.py install` "
            "(make test does) to get the SAM translator"
        )
    request = {"template": load_template(), "parameter_sets": [dict(p) for p in parameter_sets]}
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0"}
    done = subprocess.run(
        [str(SAM_PYTHON), str(TRANSLATE)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise RuntimeError(f"the SAM translator failed (exit {done.returncode})")
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    for answer in answers:
        if "error" in answer:
            raise RuntimeError(f"the SAM translator refused the template: {answer['error']}")
    return [a["template"] for a in answers]


def token(name: str, attribute: str | None = None) -> str:
    return f"<{name}.{attribute}>" if attribute else f"<{name}>"


@dataclass
class Deployment:
    """The translated template as CloudFormation would create it for these values."""

    template: Mapping[str, Any]
    given: Mapping[str, str]
    pseudo: Mapping[str, str]
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.attributes: set[tuple[str, str]] = set()  # every (resource, attribute) read
        self.values = _values(self.template, self.given)
        self._conditions: dict[str, bool] = {}
        self.created = {
            name: resource
            for name, resource in self.template["Resources"].items()
            if "Condition" not in resource or self.condition(resource["Condition"])
        }
        self.properties = {
            name: self.resolve(resource.get("Properties", {}), f"Resources/{name}")
            for name, resource in self.created.items()
        }
        for name, resource in self.created.items():
            depends = resource.get("DependsOn", [])
            for target in [depends] if isinstance(depends, str) else depends:
                if target not in self.created:
                    self.problems.append(f"{name}: DependsOn {target}, which is not created")
        self.outputs = {
            name: self.resolve(output["Value"], f"Outputs/{name}")
            for name, output in self.template.get("Outputs", {}).items()
            if "Condition" not in output or self.condition(output["Condition"])
        }

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self._condition(self.template["Conditions"][name]))
        return self._conditions[name]

    def _condition(self, expression: Any) -> Any:
        if not isinstance(expression, dict):
            return expression
        ((key, arg),) = expression.items()
        if key not in CONDITION_FUNCTIONS:
            raise ValueError(f"{key} in a condition")
        if key == "Ref":
            return self.values.get(arg, self.pseudo.get(arg))
        if key == "Condition":
            return self.condition(arg)
        if key == "Fn::Equals":
            left, right = (self._condition(a) for a in arg)
            return str(left) == str(right)
        if key == "Fn::And":
            return all(self._condition(a) for a in arg)
        if key == "Fn::Or":
            return any(self._condition(a) for a in arg)
        return not self._condition(arg[0])  # Fn::Not

    def _ref(self, name: str, where: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.values:
            return self.values[name]
        if name not in self.created:
            self.problems.append(f"{where}: Ref {name}, which is not created")
        return token(name)

    def _get_att(self, name: str, attribute: str, where: str) -> str:
        if name not in self.created:
            self.problems.append(f"{where}: GetAtt {name}.{attribute}, which is not created")
        self.attributes.add((name, attribute))
        return token(name, attribute)

    def resolve(self, value: Any, where: str) -> Any:
        if isinstance(value, list):
            items = [self.resolve(v, where) for v in value]
            return [i for i in items if i is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self._ref(arg, where)
            if key == "Fn::GetAtt":
                name, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self._get_att(name, attribute, where)
            if key.startswith("Fn::") or key == "Condition":
                return self._function(key, arg, where)
        resolved = {k: self.resolve(v, f"{where}/{k}") for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def _function(self, key: str, arg: Any, where: str) -> Any:
        if key == "Fn::If":
            name, when_true, when_false = arg
            return self.resolve(when_true if self.condition(name) else when_false, where)
        if key == "Fn::Sub":
            return self._sub(arg, where)
        if key == "Fn::Join":
            separator, items = arg
            return separator.join(str(i) for i in self.resolve(items, where))
        if key == "Fn::Split":
            separator, text = arg
            return str(self.resolve(text, where)).split(separator)
        if key == "Fn::Select":
            index, items = int(self.resolve(arg[0], where)), self.resolve(arg[1], where)
            if not 0 <= index < len(items):
                self.problems.append(f"{where}: Fn::Select index {index} out of {items!r}")
                return ""
            return items[index]
        if key == "Fn::FindInMap":
            mapping, first, second = (self.resolve(a, where) for a in arg)
            try:
                return self.template["Mappings"][mapping][first][second]
            except KeyError:
                self.problems.append(f"{where}: FindInMap {mapping}/{first}/{second} missing")
                return ""
        self.problems.append(f"{where}: {key} is not evaluated by the rehearsal")
        return ""

    def _sub(self, arg: Any, where: str) -> str:
        text, variables = (arg[0], arg[1]) if isinstance(arg, list) else (arg, {})
        local = {k: self.resolve(v, where) for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in local:
                return str(local[name])
            if "." in name and name not in self.pseudo:
                resource, attribute = name.split(".", 1)
                return self._get_att(resource, attribute, where)
            return str(self._ref(name, where))

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    # --- What the tests look at ------------------------------------------------------
    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {
            name: self.properties[name]
            for name, resource in self.created.items()
            if resource["Type"] == kind
        }

    def role_statements(self, role: str) -> list[dict[str, Any]]:
        statements: list[dict[str, Any]] = []
        for policy in self.properties[role].get("Policies", []):
            statements.extend(policy["PolicyDocument"]["Statement"])
        return statements

    def environment(self, function: str) -> dict[str, Any]:
        variables: dict[str, Any] = self.properties[function]["Environment"]["Variables"]
        return variables


def _schemas() -> tuple[Path, dict[str, str]]:
    """cfn-lint's copy of the CloudFormation resource provider schemas (in .venv-sam)."""
    found = sorted((REPO_ROOT / ".venv-sam" / "lib").glob("python3*/site-packages/cfnlint"))
    if not found:
        raise RuntimeError("cfn-lint is not in .venv-sam: run tests/support/sam_cli.py install")
    root = found[-1] / "data" / "schemas"
    index: dict[str, str] = json.loads((root / "providers" / "us-east-1.json").read_text())
    return root / "resources", index


def schema_problems(stack: Deployment) -> list[str]:
    """Each GetAtt of an attribute its resource's type does not have, and each created
    resource's top-level string properties that break the constraints of its type's
    provider schema (pattern, minLength, maxLength, enum): what CloudFormation checks when
    it creates the resource. Values holding a resource token are skipped."""
    folder, index = _schemas()
    problems: list[str] = []
    for name, attribute in sorted(stack.attributes):
        kind = stack.created.get(name, {}).get("Type", "")
        if kind not in index:
            continue
        schema = json.loads((folder / f"{index[kind]}.json").read_text(encoding="utf-8"))
        path = "/properties/" + attribute.replace(".", "/")
        if path not in schema.get("readOnlyProperties", []) and attribute not in schema.get(
            "properties", {}
        ):
            problems.append(f"GetAtt {name}.{attribute}: {kind} has no such attribute")
    for name, resource in stack.created.items():
        kind = resource["Type"]
        if kind not in index:
            continue
        schema = json.loads((folder / f"{index[kind]}.json").read_text(encoding="utf-8"))
        for prop, value in stack.properties[name].items():
            spec = schema.get("properties", {}).get(prop, {})
            # Numbers and booleans come from parameters as strings; CloudFormation converts.
            if not isinstance(value, str) or "<" in value or spec.get("type") != "string":
                continue
            where = f"{name}.{prop} {value[:60]!r}"
            if "maxLength" in spec and len(value) > spec["maxLength"]:
                problems.append(f"{where} is longer than {spec['maxLength']}")
            if "minLength" in spec and len(value) < spec["minLength"]:
                problems.append(f"{where} is shorter than {spec['minLength']}")
            if "pattern" in spec and re.search(spec["pattern"], value) is None:
                problems.append(f"{where} breaks {spec['pattern']}")
            if "enum" in spec and value not in spec["enum"]:
                problems.append(f"{where} is not one of {spec['enum']}")
    return problems


def rehearse(
    parameter_sets: Sequence[Mapping[str, str]],
    stacks: Sequence[tuple[str, str]],
) -> list[Deployment]:
    """One ``Deployment`` per parameter set, as stack ``stacks[i]`` (name, uuid); the
    sets must pass ``parameter_problems`` and ``refusals`` first."""
    translated = translate(parameter_sets)
    return [
        Deployment(t, p, pseudo_parameters(*stack))
        for t, p, stack in zip(translated, parameter_sets, stacks, strict=True)
    ]
