-- Sets the pod template's kubectl.kubernetes.io/restartedAt annotation to
-- now, as Argo CD's Deployment restart action and kubectl rollout restart
-- do: the operator recreates pods for a new restartedAt (through the
-- rollout, within maxUnavailable), it does not update them in place.
-- config/gitops/argocd/argocd-cm-patch.yaml embeds a copy of this file.
local os = require("os")
if obj.spec.template.metadata == nil then
    obj.spec.template.metadata = {}
end
if obj.spec.template.metadata.annotations == nil then
    obj.spec.template.metadata.annotations = {}
end
obj.spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"] = os.date("!%Y-%m-%dT%XZ")
return obj
