-- Argo CD health check for podset.dev PodSets, read from the operator's
-- kstatus conditions:
--   Progressing  the operator has not observed the latest spec yet, or it is
--                still converging (Reconciling=True, or Ready not yet True);
--   Degraded     Stalled=True: it cannot progress without a change, and the
--                condition's message says why;
--   Suspended    spec.paused holds a rollout back: Ready=False with reason
--                Paused (every pod exists and is available; only the paused
--                rollout is left), as Argo CD reports a paused Deployment;
--   Healthy      the latest spec is observed and Ready=True.
-- Only the base library is used: Argo CD runs custom health checks without
-- the string, math and io libraries.
-- config/gitops/argocd/argocd-cm-patch.yaml embeds a copy of this file.
local hs = {}
if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe the PodSet"
  return hs
end

local generation = obj.metadata.generation or 0
local observed = obj.status.observedGeneration or 0
if observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation .. " (observed: " .. observed .. ")"
  return hs
end

local conditions = {}
for _, c in ipairs(obj.status.conditions or {}) do
  conditions[c.type] = c
end
local function explain(c)
  if c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return c.reason
end

local stalled = conditions["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = explain(stalled)
  return hs
end
local reconciling = conditions["Reconciling"]
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = explain(reconciling)
  return hs
end
local ready = conditions["Ready"]
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = explain(ready)
  return hs
end
if ready ~= nil and ready.reason == "Paused" then
  hs.status = "Suspended"
  hs.message = explain(ready)
  return hs
end
hs.status = "Progressing"
if ready ~= nil then
  hs.message = explain(ready)
else
  hs.message = "Waiting for the operator to report the Ready condition"
end
return hs
