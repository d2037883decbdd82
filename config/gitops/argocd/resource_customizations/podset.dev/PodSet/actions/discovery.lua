-- Argo CD resource actions for podset.dev PodSets. restart recreates every
-- pod, as kubectl rollout restart does for a Deployment. The PodSet API has
-- no spec.paused, so there are no pause and resume actions.
-- config/gitops/argocd/argocd-cm-patch.yaml embeds a copy of this file.
local actions = {}
actions["restart"] = {}
return actions
