"""Operations on an error table after its writes: retention (``expire``) and replays."""
