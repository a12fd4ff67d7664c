# Booleans a role needs as booleans. Documented in boolean_problems.yml beside this file.
#
# validate_argument_spec accepts the string "false" for a bool option (it could convert it)
# but leaves the variable a string, which `when:` then refuses with "Conditionals must have
# a boolean result" and `{% if %}` takes for true. This names the variable instead.
import json

_TYPE_NAMES = {str: "a string", int: "a number", float: "a number", list: "a list", dict: "a mapping"}


def boolean_problems(values):
    """One message per item of `values` ({variable: value}) that is not a boolean; None
    (a variable without a value) is left to the argument spec."""
    problems = []
    for name in sorted(values):
        value = values[name]
        if value is None or isinstance(value, bool):
            continue
        kind = next((words for kind, words in _TYPE_NAMES.items() if isinstance(value, kind)), type(value).__name__)
        example = json.dumps({name: str(value).strip().lower() in ("true", "yes", "on", "1")})
        problems.append("%s must be true or false, unquoted, got %s (%s); with -e write it as JSON: -e '%s'"
                        % (name, json.dumps(value, default=str), kind, example))
    return problems


class FilterModule:
    def filters(self):
        return {"boolean_problems": boolean_problems}
