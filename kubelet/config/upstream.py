"""Every field upstream's v1beta1 types accept, so the loader can tell "not ours yet" from a typo.

A key upstream knows but we do not model is accepted and reported in one warning; a key
neither knows is an error (a typo such as ``staticPodPth`` must not be silently ignored).
Restated from staging/src/k8s.io/kubelet/config/v1beta1/types.go (Kubernetes 1.36).
"""

from __future__ import annotations

from collections.abc import Mapping

from .kubeletconfig import KubeletConfiguration, LoggingConfiguration

_NAMES = """
    enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency httpCheckFrequency
    staticPodURL staticPodURLHeader address port readOnlyPort tlsCertFile tlsPrivateKeyFile
    tlsCipherSuites tlsCurvePreferences tlsMinVersion rotateCertificates serverTLSBootstrap
    authentication authorization registryPullQPS registryBurst
    imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist eventRecordQPS
    eventBurst enableDebuggingHandlers enableContentionProfiling healthzPort healthzBindAddress
    oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout
    nodeStatusUpdateFrequency nodeStatusReportFrequency nodeLeaseDurationSeconds
    imageMinimumGCAge imageMaximumGCAge imageGCHighThresholdPercent imageGCLowThresholdPercent
    volumeStatsAggPeriod kubeletCgroups systemCgroups cgroupRoot cgroupsPerQOS cgroupDriver
    cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions cpuManagerReconcilePeriod
    draManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy topologyManagerScope
    topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode maxPods podCIDR
    podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages
    maxOpenFiles contentType kubeAPIQPS kubeAPIBurst serializeImagePulls maxParallelImagePulls
    evictionHard evictionSoft evictionSoftGracePeriod evictionPressureTransitionPeriod
    evictionMaxPodGracePeriod evictionMinimumReclaim mergeDefaultEvictionSettings podsPerCore
    enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains
    iptablesMasqueradeBit iptablesDropBit featureGates failSwapOn memorySwap
    containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers containerLogMonitorInterval
    configMapAndSecretChangeDetectionStrategy systemReserved kubeReserved reservedSystemCPUs
    showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup enforceNodeAllocatable
    allowedUnsafeSysctls volumePluginDir providerID kernelMemcgNotification logging
    enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod
    shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff
    reservedMemory enableProfilingHandler enableDebugFlagsHandler seccompDefault
    memoryThrottlingFactor memoryReservationPolicy registerWithTaints registerNode tracing
    localStorageCapacityIsolation containerRuntimeEndpoint imageServiceEndpoint failCgroupV1
    userNamespaces
"""
KUBELET_CONFIGURATION_FIELDS = frozenset(_NAMES.split())

LOGGING_CONFIGURATION_FIELDS = frozenset(
    ["format", "flushFrequency", "verbosity", "vmodule", "options"]
)

UPSTREAM_FIELDS: Mapping[type, frozenset[str]] = {
    KubeletConfiguration: KUBELET_CONFIGURATION_FIELDS,
    LoggingConfiguration: LOGGING_CONFIGURATION_FIELDS,
}
"""Upstream's keys per class; classes not listed model all of upstream's keys."""
