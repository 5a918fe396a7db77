# evo_plugin_long_paid.py
from evo_core.api import BaseDiagnostic, Finding, Param, hookimpl


class LongPaidResponses(BaseDiagnostic):
    name, version = "long_paid_responses", "0.1.0"
    kinds = ("long_paid_responses",)  # what its findings report; retirement looks it up
    parameters = {"max_chars": Param(200, min=1, doc="a response longer than this is long"),
                  "max_rate": Param(0.2, min=0.0, max=1.0, doc="fire above this share of paid ones")}

    def measure(self, window, params, kind=None):  # the statistic, fired or not
        paid = [r for r in window.rollouts if (r.reward or 0) > 0]
        long = [r for r in paid if r.features.get("chars", 0) > self.params(params)["max_chars"]]
        return len(long) / len(paid) if paid else 0.0

    def evaluate(self, window, params):
        p, rate = self.params(params), self.measure(window, params)
        if rate <= p["max_rate"]:
            return []
        long = [r for r in window.rollouts if (r.reward or 0) > 0 and r.features.get("chars", 0) > p["max_chars"]]
        return [Finding(kind="long_paid_responses", severity="warning",
                        evidence=[r.event_id for r in long], stats={"value": rate, "rate": rate})]


@hookimpl
def evo_register_diagnostics():
    return [LongPaidResponses()]
