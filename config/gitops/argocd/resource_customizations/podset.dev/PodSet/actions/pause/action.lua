-- Sets spec.paused to true, as Argo CD's Deployment pause action and
-- kubectl podset rollout pause do: template changes then update no pod
-- until the PodSet is resumed. A manifest in Git that sets spec.paused
-- puts its value back at the next sync; pause in Git instead.
-- config/gitops/argocd/argocd-cm-patch.yaml embeds a copy of this file.
obj.spec.paused = true
return obj
