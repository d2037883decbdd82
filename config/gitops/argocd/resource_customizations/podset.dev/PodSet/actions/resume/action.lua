-- Sets spec.paused to false, as Argo CD's Deployment resume action and
-- kubectl podset rollout resume do: the operator rolls out what the pause
-- held back. A manifest in Git that sets spec.paused puts its value back
-- at the next sync; resume in Git instead.
-- config/gitops/argocd/argocd-cm-patch.yaml embeds a copy of this file.
obj.spec.paused = false
return obj
