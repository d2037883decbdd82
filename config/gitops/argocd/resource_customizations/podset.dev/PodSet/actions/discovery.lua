-- Argo CD resource actions for podset.dev PodSets, as Argo CD offers them
-- for a Deployment: restart recreates every pod, as kubectl rollout restart
-- does; pause and resume set spec.paused, as kubectl podset rollout
-- pause|resume do, each offered only when it changes something.
-- config/gitops/argocd/argocd-cm-patch.yaml embeds a copy of this file.
local actions = {}
actions["restart"] = {}
local paused = false
if obj.spec.paused ~= nil then
    paused = obj.spec.paused
end
actions["pause"] = {["disabled"] = paused}
actions["resume"] = {["disabled"] = not(paused)}
return actions
