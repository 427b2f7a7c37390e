{{/* Names ------------------------------------------------------------------------------ */}}

{{- define "sandpit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sandpit.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sandpit.operator.fullname" -}}
{{- printf "%s-operator" (include "sandpit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sandpit.egress.fullname" -}}
{{- printf "%s-egress-proxy" (include "sandpit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret holding the key of the sandboxes' proxy credentials (operator and proxy). */}}
{{- define "sandpit.egress.keySecret" -}}
{{- default (printf "%s-egress-key" (include "sandpit.fullname" .) | trunc 63 | trimSuffix "-") .Values.egress.key.existingSecret }}
{{- end }}

{{- define "sandpit.gateway.fullname" -}}
{{- printf "%s-gateway" (include "sandpit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The namespace the gateway creates SandboxRuns in. */}}
{{- define "sandpit.gateway.runNamespace" -}}
{{- default .Release.Namespace .Values.gateway.runNamespace }}
{{- end }}

{{/* The tenants' namespace names, each once (values: tenants.namespaces[].name). */}}
{{- define "sandpit.tenantNamespaces" -}}
{{- $names := list }}
{{- range .Values.tenants.namespaces }}{{ $names = append $names .name }}{{ end }}
{{- toJson (uniq $names) }}
{{- end }}

{{/* Every namespace the gateway makes runs and sessions in: its own, then the tenants'. */}}
{{- define "sandpit.gateway.namespaces" -}}
{{- toJson (prepend (include "sandpit.tenantNamespaces" . | fromJsonArray) (include "sandpit.gateway.runNamespace" .) | uniq) }}
{{- end }}

{{- define "sandpit.gateway.secretName" -}}
{{- default (include "sandpit.gateway.fullname" .) .Values.gateway.auth.existingSecret }}
{{- end }}

{{- define "sandpit.gateway.secretKey" -}}
{{- if .Values.gateway.auth.existingSecret }}{{ .Values.gateway.auth.existingSecretKey }}{{ else }}token{{ end }}
{{- end }}

{{/* Labels ----------------------------------------------------------------------------- */}}

{{- define "sandpit.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "sandpit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sandpit
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "component" "operator") */}}
{{- define "sandpit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sandpit.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "sandpit.componentLabels" -}}
{{ include "sandpit.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Pods ------------------------------------------------------------------------------- */}}

{{- define "sandpit.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The address the processes bind: all interfaces in the pod's own network namespace; loopback
     only when the pod shares the node's (hostNetwork). */}}
{{- define "sandpit.bindHost" -}}
{{- if .Values.hostNetwork }}127.0.0.1{{ else }}0.0.0.0{{ end }}
{{- end }}

{{/* The ServiceAccount a component runs as: (dict "root" $ "component" "operator") */}}
{{- define "sandpit.serviceAccountName" -}}
{{- $sa := (index .root.Values .component).serviceAccount }}
{{- if $sa.create }}
{{- default (printf "%s-%s" (include "sandpit.fullname" .root) .component | trunc 63 | trimSuffix "-") $sa.name }}
{{- else }}
{{- default "default" $sa.name }}
{{- end }}
{{- end }}

{{/* Pod-level settings shared by the operator and the gateway: (dict "root" $ "component" "operator") */}}
{{- define "sandpit.podSpecCommon" -}}
{{- $c := index .root.Values .component }}
serviceAccountName: {{ include "sandpit.serviceAccountName" . }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
enableServiceLinks: false
{{- if .root.Values.hostNetwork }}
hostNetwork: true
{{- end }}
{{- with .root.Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Scheduling keys of a component's pod (the end of its spec). */}}
{{- define "sandpit.podScheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* With host networking a new pod cannot start beside the old one (same node ports): replace, then start. */}}
{{- define "sandpit.strategy" -}}
{{- if .Values.hostNetwork }}
strategy:
  type: RollingUpdate
  rollingUpdate:
    maxSurge: 0
    maxUnavailable: 1
{{- end }}
{{- end }}

{{/* KUBERNETES_SERVICE_HOST/PORT when the API server is reached some other way than the Service. */}}
{{- define "sandpit.apiServerEnv" -}}
{{- if .Values.apiServer.host }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.apiServer.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ default "443" .Values.apiServer.port | toString | quote }}
{{- end }}
{{- end }}

{{/* Config files ------------------------------------------------------------------------ */}}

{{/* The sandbox policy and the cluster's RuntimeClasses, as both config files hold them. */}}
{{- define "sandpit.sandboxPolicy" -}}
{{- $s := .Values.sandbox }}
{{- $k := dict "pendingTimeoutSeconds" $s.pendingTimeoutSeconds }}
{{- with $s.runtimeClassName }}{{ $_ := set $k "runtimeClassName" . }}{{ end }}
{{- with $s.allowedRuntimeClasses }}{{ $_ := set $k "allowedRuntimeClasses" . }}{{ end }}
{{- $sandbox := dict "maxCpu" (toString $s.maxCpu) "maxMemory" (toString $s.maxMemory) "timeoutSeconds" $s.timeoutSeconds }}
{{- with $s.imageAllowlist }}{{ $_ := set $sandbox "imageAllowlist" . }}{{ end }}
{{- if .Values.egress.enabled }}
{{- $_ := set $sandbox "disableNetwork" false }}
{{- $_ := set $sandbox "egress" (dict "allow" .Values.egress.allow "internalCidrs" .Values.egress.internalCidrs) }}
{{- end }}
{{- toJson (dict "sandbox" $sandbox "kubernetes" $k) }}
{{- end }}

{{/* Where the operator's Lease is: the operator holds it, the gateway's health reads it. */}}
{{- define "sandpit.operatorLease" -}}
{{- toJson (dict "leaderElection" true "leaseName" (include "sandpit.operator.fullname" .) "leaseNamespace" .Release.Namespace) }}
{{- end }}

{{- define "sandpit.operator.config" -}}
{{- $c := include "sandpit.sandboxPolicy" . | fromJson }}
{{- $o := .Values.operator }}
{{- $op := include "sandpit.operatorLease" . | fromJson }}
{{- $_ := set $op "imagePullPolicy" .Values.sandbox.imagePullPolicy }}
{{- /* Watching some namespaces only: the tenants' are watched too, or their runs would never start. */}}
{{- $watch := $o.watchNamespaces }}
{{- if $watch }}{{ $watch = concat $watch (include "sandpit.tenantNamespaces" . | fromJsonArray) | uniq }}{{ end }}
{{- $_ := set $op "namespaces" $watch }}
{{- $_ := set $op "ttlSecondsAfterFinished" .Values.sandbox.ttlSecondsAfterFinished }}
{{- $_ := set $op "probeHost" (include "sandpit.bindHost" .) }}
{{- $_ := set $op "probePort" $o.probePort }}
{{- $_ := set $op "seccompProfile" .Values.sandbox.seccomp.profile }}
{{- $_ := set $op "gvisorRuntimeClasses" .Values.sandbox.seccomp.gvisorRuntimeClasses }}
{{- if kindIs "bool" .Values.networkPolicy.enforced }}
{{- $_ := set $op "networkPolicyEnforced" .Values.networkPolicy.enforced }}
{{- end }}
{{- $_ := set $c.kubernetes "operator" $op }}
{{- with (include "sandpit.egress.settings" . | fromJson) }}{{ $_ := set $c.kubernetes "egress" . }}{{ end }}
{{- $_ := set $c "logging" (dict "level" $o.logLevel) }}
{{- toYaml (mustMergeOverwrite $c (deepCopy $o.extraConfig)) }}
{{- end }}

{{/* kubernetes.egress of the operator's and the proxy's config files (empty when egress is off). */}}
{{- define "sandpit.egress.settings" -}}
{{- $e := .Values.egress }}
{{- if $e.enabled }}
{{- $s := dict "enabled" true "networkPolicyEnforced" $e.networkPolicyEnforced "service" (include "sandpit.egress.fullname" .) "namespace" .Release.Namespace "port" $e.port "probePort" $e.probePort "listenHost" (include "sandpit.bindHost" .) "keyFile" "/etc/sandpit-egress/key" }}
{{- $_ := set $s "podLabels" (include "sandpit.selectorLabels" (dict "root" . "component" "egress-proxy") | fromYaml) }}
{{- with $e.namespaceLabels }}{{ $_ := set $s "namespaceLabels" . }}{{ end }}
{{- toJson $s }}
{{- else }}
{{- toJson dict }}
{{- end }}
{{- end }}

{{/* `sandpit egress-proxy`'s config: the policy (it evaluates each run's allowlist as the operator does), the namespaces it watches, kubernetes.egress. */}}
{{- define "sandpit.egress.config" -}}
{{- $c := include "sandpit.sandboxPolicy" . | fromJson }}
{{- $watch := .Values.operator.watchNamespaces }}
{{- if $watch }}{{ $watch = concat $watch (include "sandpit.tenantNamespaces" . | fromJsonArray) | uniq }}{{ end }}
{{- $_ := set $c.kubernetes "operator" (dict "namespaces" $watch) }}
{{- $_ := set $c.kubernetes "egress" (include "sandpit.egress.settings" . | fromJson) }}
{{- $_ := set $c "logging" (dict "level" .Values.egress.logLevel) }}
{{- toYaml (mustMergeOverwrite $c (deepCopy .Values.egress.extraConfig)) }}
{{- end }}

{{- define "sandpit.gateway.config" -}}
{{- $c := include "sandpit.sandboxPolicy" . | fromJson }}
{{- $g := .Values.gateway }}
{{- $_ := set $c.sandbox "backend" "kubernetes" }}
{{- $_ := set $c.sandbox "maxConcurrentRuns" $g.maxConcurrentRuns }}
{{- /* A stateful MCP session lives in one process: more than one replica means stateless, for good. */}}
{{- $server := dict "host" (include "sandpit.bindHost" .) "port" $g.port "stateless" (or $g.stateless (gt (int $g.replicas) 1)) }}
{{- $hosts := $g.allowedHosts }}
{{- if $g.ingress.enabled }}{{ range $g.ingress.hosts }}{{ with .host }}{{ $hosts = append $hosts . }}{{ end }}{{ end }}{{ end }}
{{- with $hosts }}{{ $_ := set $server "allowedHosts" (concat . (list "localhost")) }}{{ end }}
{{- $_ := set $c "server" $server }}
{{- $gw := dict "namespace" (include "sandpit.gateway.runNamespace" .) "ttlSecondsAfterFinished" $g.ttlSecondsAfterFinished "pickupTimeoutSeconds" (coalesce $g.admitTimeoutSeconds $g.pickupTimeoutSeconds) }}
{{- $_ := set $c.kubernetes "gateway" $gw }}
{{- $_ := set $c.kubernetes "operator" (include "sandpit.operatorLease" . | fromJson) }}
{{- $_ := set $c "logging" (dict "level" $g.logLevel) }}
{{- /* The root filesystem is read-only: the log is the audit trail (extraConfig.audit.file on a volume keeps a file too). */}}
{{- $_ := set $c "audit" (dict "enabled" false) }}
{{- toYaml (mustMergeOverwrite $c (deepCopy $g.extraConfig)) }}
{{- end }}

{{/* Probes of a component on its named port: (dict "root" $ "port" "probes" "path" "/readyz") */}}
{{- define "sandpit.httpProbe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
  {{- if .root.Values.hostNetwork }}
  host: 127.0.0.1
  {{- end }}
  {{- $g := .root.Values.gateway }}
  {{- if and (eq .port "http") (or $g.allowedHosts (and $g.ingress.enabled $g.ingress.hosts)) }}
  httpHeaders:
    - name: Host
      value: localhost
  {{- end }}
{{- end }}

{{/* Checks that fail the render with a message. */}}
{{- define "sandpit.validate" -}}
{{- $watch := .Values.operator.watchNamespaces }}
{{- if and .Values.gateway.enabled .Values.operator.enabled $watch (not (has (include "sandpit.gateway.runNamespace" .) $watch)) }}
{{- fail (printf "gateway.runNamespace %q is not in operator.watchNamespaces %v: the operator would never run the gateway's SandboxRuns" (include "sandpit.gateway.runNamespace" .) $watch) }}
{{- end }}
{{- $tenants := list }}
{{- range .Values.tenants.namespaces }}
{{- if has .name $tenants }}
{{- fail (printf "tenants.namespaces: %q is listed twice" .name) }}
{{- end }}
{{- $tenants = append $tenants .name }}
{{- end }}
{{- $served := include "sandpit.gateway.namespaces" . | fromJsonArray }}
{{- range (dig "auth" "tokens" list (.Values.gateway.extraConfig | default dict)) }}
{{- if and .namespace (not (has .namespace $served)) }}
{{- fail (printf "gateway.extraConfig.auth.tokens: token %q maps to namespace %q, which is not in tenants.namespaces: the gateway would have no Role there" (.name | default "?") .namespace) }}
{{- end }}
{{- end }}
{{- $pools := list }}
{{- range .Values.pools }}
{{- $pool := . }}
{{- range (ternary (list .namespace) $served (not (empty .namespace))) }}
{{- $key := printf "%s/%s" . $pool.name }}
{{- if has $key $pools }}
{{- fail (printf "pools: %q is listed twice for namespace %q" $pool.name .) }}
{{- end }}
{{- $pools = append $pools $key }}
{{- if and $.Values.operator.enabled $watch (not (has . $watch)) (not (has . $tenants)) }}
{{- fail (printf "pools: %q is in namespace %q, which the operator does not watch (operator.watchNamespaces %v): it would never get pods" $pool.name . $watch) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.apiServer.port (not .Values.apiServer.host) }}
{{- fail "apiServer.port needs apiServer.host" }}
{{- end }}
{{- with .Values.gateway.auth.token }}
{{- if lt (len .) 8 }}
{{- fail (printf "gateway.auth.token: expected at least 8 characters, got %d (or leave it empty: one is generated)" (len .)) }}
{{- end }}
{{- end }}
{{- if and .Values.admissionPolicy.enabled (not (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version)) }}
{{- fail (printf "admissionPolicy.enabled needs Kubernetes 1.30 or later (ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1); this cluster is %s" .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- end }}
