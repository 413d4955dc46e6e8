"""The controller's role, with every allowed transition spelled out.

    STANDBY ──(Raft elects us, term T)──> ACTIVATING(T) ──(our LEADER_CHANGE commits)──> ACTIVE(T)
       ^                                        |                                         |
       └──────────(leadership lost, term moves on, or our LEADER_CHANGE is rejected)──────┘

Only ACTIVE decides and answers admin requests; ACTIVATING waits until every entry of earlier terms
is applied (they commit before our LEADER_CHANGE), so decisions are never taken on a partial image.
A transition not drawn above raises `IllegalTransitionError`: continuing in a wrong state is worse
than stopping.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Role(Enum):
    STANDBY = "standby"
    ACTIVATING = "activating"
    ACTIVE = "active"


_ALLOWED = {
    (Role.STANDBY, Role.ACTIVATING),
    (Role.ACTIVATING, Role.ACTIVE),
    (Role.ACTIVATING, Role.STANDBY),
    (Role.ACTIVE, Role.STANDBY),
}


class IllegalTransitionError(AssertionError):
    pass


@dataclass(frozen=True, slots=True)
class RoleState:
    role: Role
    epoch: int  # the Raft term of ACTIVATING/ACTIVE; -1 for STANDBY

    @staticmethod
    def standby() -> RoleState:
        return RoleState(Role.STANDBY, -1)

    def to_activating(self, epoch: int) -> RoleState:
        return self._to(Role.ACTIVATING, epoch)

    def to_active(self) -> RoleState:
        return self._to(Role.ACTIVE, self.epoch)

    def to_standby(self) -> RoleState:
        return self._to(Role.STANDBY, -1)

    def _to(self, role: Role, epoch: int) -> RoleState:
        if (self.role, role) not in _ALLOWED:
            raise IllegalTransitionError(f"illegal controller transition {self.role} -> {role}")
        if role is not Role.STANDBY and epoch < 0:
            raise IllegalTransitionError(f"{role} needs an epoch, got {epoch}")
        return RoleState(role, epoch)
