"""``internal.ask_user``: the model asks the user a question and waits for the answer (issue 37 item 3).

:mod:`~agent_core._questions.service` holds the runtime's question callback and the deferred questions
(``AgentRuntime.answer_question``); :mod:`~agent_core._questions.tool` is the tool (its static definition
in :mod:`~agent_core._questions.definition`).
"""
