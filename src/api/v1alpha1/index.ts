/** The sandpit.dev/v1alpha1 API: SandboxRun schemas and types, conditions, labels, the CRD. */
export {
  API_VERSION,
  ConditionSchema,
  GROUP,
  KIND,
  LIST_KIND,
  ObjectMetaSchema,
  PLURAL,
  RunOutputSchema,
  SandboxRunSchema,
  SandboxRunSpecSchema,
  SandboxRunStatusSchema,
  SHORT_NAMES,
  SINGULAR,
  toRunRequestInput,
  VERSION,
  type Condition,
  type ObjectMeta,
  type RunOutput,
  type SandboxRun,
  type SandboxRunSpec,
  type SandboxRunSpecInput,
  type SandboxRunStatus,
} from './sandboxrun.js';
export { ConditionType, findCondition, setCondition, type ConditionInput } from './conditions.js';
export {
  ANNOTATION_PRINCIPAL,
  childName,
  LABEL_COMPONENT,
  LABEL_MANAGED_BY,
  LABEL_RUN,
  LABEL_RUN_UID,
  labelValueFor,
  MANAGED_BY_OPERATOR,
  shortHash,
} from './labels.js';
export { buildCrd, CRD_FILE, CRD_NAME, toStructuralSchema, type JsonSchema } from './crd.js';
export { renderCrdYaml } from './render.js';
