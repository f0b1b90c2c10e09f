"""The texts the policy embeds (config `policy_inputs`): the suite's, or the reference selector's, quoted as data.

The reference's selector (tianyao-aka/HieraMAS at cacb988) reads, per role node, the sentence embedding of one
task+role text (`model/embeddings.py` `PositionLLMEmbedder.get_task_role_embedding`):

  "Task: {task[:1500]}\\n\\nRole: {role}\\n{role_description}"

where the description is the role's entry of `prompt/role_descriptions.py` `ROLE_META_DESC` (the node takes it in
`graph/learnable_multi_node.py` `LearnableMultiNode.__init__`: `get_role_description(role)`, the 'default' entry
for a role the table lacks) and the task is the node's `input['task']`, the query before any predecessor's output
(`forward` passes `task`, not the enhanced task, to `select_llms`). Here the task is the suite's item.question,
as for the reference prompts and the metadata call.

Its position input is a learned table (`model/llm_selector.py` `compute_logits`: `pos_emb = self.pos_embedding(
pos_indices)`, an nn.Embedding(20, 128) concatenated into the row map), the same for every query, as the suite's
learned per-position vector is. `prompt/position_prompts.py` (PositionPromptGenerator) writes a text per position,
but its one caller, `PositionLLMEmbedder.get_position_embeddings`, is called by no selector path (`select_llms`,
`select_llms_topN_rotation` and `get_selection_probs` embed the profiles, the task+role text and the metadata
only), so those texts never reach the policy and are not used here.
"""

from __future__ import annotations

from typing import Callable, Mapping

from hieramas_jax.learn import policy as policy_lib

# `get_task_role_embedding`: the task is cut at this many characters.
TASK_CHARS = 1500

# prompt/role_descriptions.py ROLE_META_DESC: the entries of the suite's roles (each stripped, as there), and the
# 'default' entry `get_role_description` falls back to.
ROLE_META_DESC: Mapping[str, str] = {
    "Mathematical Analyst": (
        "Mathematical Analyst role specialized in breaking down complex math problems.\n"
        "Responsibilities: Identify mathematical structure, define variables, set up equations.\n"
        "Strengths: Problem decomposition, variable identification, equation formulation.\n"
        "Approach: Systematic analysis before solution, clear variable definitions.\n"
        "Best for: Initial problem understanding and mathematical modeling."),
    "Math Solver": (
        "Math Solver role specialized in executing mathematical computations.\n"
        "Responsibilities: Solve equations, perform calculations, verify numerical results.\n"
        "Strengths: Accurate computation, step-by-step solutions, arithmetic precision.\n"
        "Approach: Methodical calculation with verification at each step.\n"
        "Best for: Carrying out calculations and deriving numerical answers."),
    "Inspector": (
        "Inspector role specialized in reviewing and validating solutions.\n"
        "Responsibilities: Check solution correctness, identify errors, verify final answers.\n"
        "Strengths: Error detection, logical verification, quality assurance.\n"
        "Approach: Critical review of reasoning and calculations, edge case checking.\n"
        "Best for: Final verification and error catching before submission."),
    "Project Manager": (
        "Project Manager role specialized in design patterns and code structure.\n"
        "Responsibilities: Coordinate solution strategy, organize workflow, manage approach.\n"
        "Strengths: Strategic planning, workflow organization, high-level design.\n"
        "Approach: Top-down planning and coordination of solution components.\n"
        "Best for: Complex problems requiring structured multi-step approaches."),
    "Algorithm Designer": (
        "Algorithm Designer role specialized in algorithm design and pseudocode.\n"
        "Responsibilities: Design algorithms, create pseudocode, plan computational steps.\n"
        "Strengths: Algorithm optimization, logical flow design, complexity analysis.\n"
        "Approach: Design-first thinking with clear algorithmic specifications.\n"
        "Best for: Problems requiring novel algorithms or optimization."),
    "Test Analyst": (
        "Test Analyst role specialized in test cases and edge conditions.\n"
        "Responsibilities: Identify edge cases, design test scenarios, validate solutions.\n"
        "Strengths: Edge case discovery, boundary testing, comprehensive validation.\n"
        "Approach: Systematic test case generation and solution stress-testing.\n"
        "Best for: Ensuring solution robustness across all possible inputs."),
    "Programming Expert": (
        "Programming Expert role specialized in writing executable code.\n"
        "Responsibilities: Implement algorithms, write clean code, handle edge cases.\n"
        "Strengths: Code generation, syntax correctness, implementation skills.\n"
        "Approach: Convert problem specifications into working, tested code.\n"
        "Best for: Tasks requiring actual code implementation."),
    "Bug Fixer": (
        "Bug Fixer role specialized in debugging and code correction.\n"
        "Responsibilities: Identify bugs, fix errors, improve code robustness.\n"
        "Strengths: Debugging, error analysis, code improvement.\n"
        "Approach: Analyze failing code, identify root causes, apply fixes.\n"
        "Best for: Correcting issues in existing code implementations."),
    # The key keeps the reference's (and the suite's) role-name spelling; the text spells "Knowledgeable".
    "Knowlegable Expert": (
        "Knowledgeable Expert role specialized in domain knowledge and research.\n"
        "Responsibilities: Provide domain expertise, search for relevant information.\n"
        "Strengths: Deep domain knowledge, information retrieval, expert insights.\n"
        "Approach: Knowledge-driven problem solving with expert references.\n"
        "Best for: Problems requiring specialized domain knowledge."),
    "Critic": (
        "Critic role specialized in critical analysis and feedback.\n"
        "Responsibilities: Critique solutions, identify weaknesses, suggest improvements.\n"
        "Strengths: Critical thinking, weakness identification, constructive feedback.\n"
        "Approach: Adversarial analysis to find flaws and improve quality.\n"
        "Best for: Improving solution quality through critical review."),
    "Mathematician": (
        "Mathematician role for STEM questions.\n"
        "Responsibilities: Handle mathematical reasoning, calculations, formal logic.\n"
        "Strengths: Numerical computation, formal proofs, quantitative analysis.\n"
        "Approach: Apply mathematical principles systematically.\n"
        "Best for: Math, physics, engineering, and quantitative questions."),
    "Psychologist": (
        "Psychologist role for behavioral and social questions.\n"
        "Responsibilities: Analyze human behavior, cognitive processes, social dynamics.\n"
        "Strengths: Understanding human nature, psychological theories, research methods.\n"
        "Approach: Apply psychological frameworks to understand phenomena.\n"
        "Best for: Psychology, sociology, and human behavior questions."),
    "Historian": (
        "Historian role for historical and cultural questions.\n"
        "Responsibilities: Provide historical context, analyze events, identify patterns.\n"
        "Strengths: Chronological knowledge, cause-effect analysis, cultural awareness.\n"
        "Approach: Place questions in historical context and analyze significance.\n"
        "Best for: History, political science, and cultural studies questions."),
    "Doctor": (
        "Medical Doctor role for health and biology questions.\n"
        "Responsibilities: Medical knowledge, biological processes, health advice.\n"
        "Strengths: Anatomy, physiology, disease mechanisms, treatments.\n"
        "Approach: Apply medical and biological knowledge systematically.\n"
        "Best for: Medicine, biology, and health-related questions."),
    "Lawyer": (
        "Lawyer role for legal and ethical questions.\n"
        "Responsibilities: Legal reasoning, case analysis, ethical frameworks.\n"
        "Strengths: Legal principles, argumentation, precedent analysis.\n"
        "Approach: Apply legal and ethical frameworks to analyze situations.\n"
        "Best for: Law, ethics, and governance questions."),
    "Economist": (
        "Economist role for economic and business questions.\n"
        "Responsibilities: Economic analysis, market dynamics, financial reasoning.\n"
        "Strengths: Economic theories, quantitative analysis, market understanding.\n"
        "Approach: Apply economic principles to analyze scenarios.\n"
        "Best for: Economics, business, finance questions."),
    "default": (
        "General problem-solving agent role.\n"
        "Responsibilities: Analyze problems and provide solutions.\n"
        "Strengths: General reasoning and problem-solving capabilities.\n"
        "Approach: Systematic analysis and solution generation.\n"
        "Best for: General tasks without specialized requirements."),
}


def role_description(role: str) -> str:
  """The reference's description of `role` (`get_role_description`: the 'default' entry for an unknown role)."""
  return ROLE_META_DESC.get(role, ROLE_META_DESC["default"])


def reference_text(query: str, role: str, description: str) -> str:
  """The reference's task+role text (`get_task_role_embedding`). `description` is the suite's, unused: the
  reference reads its own (`role_description`); the argument keeps one signature for both text kinds."""
  del description
  return f"Task: {query[:TASK_CHARS]}\n\nRole: {role}\n{role_description(role)}"


# config `policy_inputs` -> the text h_{Q,r} embeds: f(query, role, the suite's description of the role).
TEXTS: Mapping[str, Callable[[str, str, str], str]] = {"suite": policy_lib.query_role_text,
                                                      "reference": reference_text}
